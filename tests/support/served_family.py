"""Checks of one family's model on the test server (tests/conftest.py's ``client``).

The served outputs against transformers' torchvision class in the oracle venv, inline and
through /dev/shm, and the client's ``--verify`` verdict."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from smg_fast.client import _verify

from .tv_oracle import run_oracle


def equals_torchvision_oracle(client: Any, encoded: dict[str, bytes], model: str, cls: str,
                              kwargs: dict[str, Any], workdir: Path) -> None:
    """Each encoded image served by ``model`` equals the oracle's ``cls`` built with kwargs."""
    jobs = [{"cls": cls, "kwargs": kwargs,
             "images": [Image.open(io.BytesIO(data)).convert("RGB")]}
            for data in encoded.values()]
    for (name, data), ref in zip(encoded.items(), run_oracle(workdir, jobs), strict=True):
        for transport in ("inline", "shm"):
            item = client.preprocess(data, model=model, transport=transport).items[0]
            assert np.array_equal(np.asarray(item.pixel_values), ref["pixel_values"]), name


def served_twice(client: Any, data: list[bytes], model: str) -> Any:
    """The first of two equal requests; the second is answered from the pixel cache, equal."""
    first = client.preprocess(data, model=model, transport="inline")
    again = client.preprocess(data, model=model, transport="inline")
    assert [it.cache_hit for it in again.items] == [True] * len(data)
    for a, b in zip(first.items, again.items, strict=True):
        assert np.array_equal(a.pixel_values, b.pixel_values)
    return first


def verify_is_exact(client: Any, data: bytes, model: str, backend: str = "pil") -> None:
    """The client's --verify finds the served output of data bit-exact with transformers."""
    got = client.preprocess(data, model=model, transport="inline").items[0].pixel_values
    verdict = _verify(client.model_info(), model, data, "float32", got)
    assert verdict.endswith(f"bit-exact with transformers ({backend})"), verdict


__all__ = ["equals_torchvision_oracle", "served_twice", "verify_is_exact"]
