"""What the engine plug-in tests share.

The engine's venv (fail, never skip, without it), JPEG bytes of a test image, waiting for a runner
process, and comparing two runs' requests."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from smg_fast.testing.engine_env import engine_python
from smg_fast.testing.oracle_venv import OracleVenvMissing

TIMEOUT = 900
REPO = Path(__file__).resolve().parents[2]


def engine_python_or_fail(name: str) -> Path:
    """The engine venv's python; the test fails naming the script that makes it."""
    try:
        return engine_python(name, REPO)
    except OracleVenvMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def jpeg(image: Image.Image, exif_orientation: int | None = None, **save: Any) -> bytes:
    """image as a quality-90 JPEG (Pillow's default 4:2:0, or save's options).

    With an EXIF orientation tag when exif_orientation is given."""
    buf = io.BytesIO()
    if exif_orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        save["exif"] = exif.tobytes()
    image.save(buf, "JPEG", quality=90, **save)
    return buf.getvalue()


def finish(proc: subprocess.Popen[str], workdir: Path, what: str) -> tuple[dict[str, Any], str]:
    """Waits for a runner; its result and its whole log (stdout + stderr)."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        pytest.fail(f"{what} runner failed (rc {proc.returncode}):\n{err[-6000:]}",
                    pytrace=False)
    return pickle.loads((workdir / "result.pkl").read_bytes()), out + err


def assert_same_requests(ours: list[dict[str, Any]], ref: list[dict[str, Any]],
                         fields: tuple[str, ...] = ("pixel_values", "image_grid_thw")) -> None:
    """Same prompt ids and, per image, every multimodal field identical (dtype and values).

    fields are those each request must have."""
    for r, (req_ours, req_ref) in enumerate(zip(ours, ref, strict=True)):
        assert req_ours["prompt_token_ids"] == req_ref["prompt_token_ids"], r
        assert set(req_ours["fields"]) == set(req_ref["fields"]) >= set(fields)
        for key, arrays in req_ref["fields"].items():
            for i, (a, b) in enumerate(zip(req_ours["fields"][key], arrays, strict=True)):
                assert a.dtype == b.dtype and a.shape == b.shape, (key, i, a.dtype, b.dtype)
                assert np.array_equal(a, b), f"{key} of image {i} of request {r} differs"


def image_token_count(request: dict[str, Any], folder: Path, key: str = "image_token_id") -> int:
    """How many of the model's image tokens (config.json's key) a rendered prompt holds."""
    config = json.loads((folder / "config.json").read_text())
    return int(request["prompt_token_ids"].count(config[key]))


def photo_1080p(real_images: Any) -> Image.Image:
    """The engine tests' 1920x1080 photo (Hubble, resized with LANCZOS)."""
    return real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS)


def run_on_and_off(start: Callable[[Path, str, Path], subprocess.Popen[str]], base: Path,
                   what: str) -> tuple[tuple[dict[str, Any], str], tuple[dict[str, Any], str]]:
    """Runs start(workdir, plugin, overlay) with the plug-in on ("1") and off ("0") at once.

    One smg-fast overlay (engine_env.make_overlay) under base serves both; returns both results."""
    from smg_fast.testing.engine_env import make_overlay

    overlay = make_overlay(base / "overlay")
    on, off = start(base / "on", "1", overlay), start(base / "off", "0", overlay)
    return finish(on, base / "on", what), finish(off, base / "off", what)
