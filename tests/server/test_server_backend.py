"""The backend per served model.

--model NAME=SOURCE:BACKEND, GetModelInfo's backend field, the server's output equal to
transformers' processor of that backend, and the client's --verify comparing with the matching
backend only."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

pytest.importorskip("grpc")

from support.tv_oracle import KIMI_HUB, run_oracle  # noqa: E402

import smg_fast  # noqa: E402
from smg_fast.client import _verify  # noqa: E402
from smg_fast.client import main as client_main  # noqa: E402
from smg_fast.server.flags import config_from_args, parse_model  # noqa: E402
from smg_fast.server.models import split_backend  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

MODELS = [("pil", "qwen2_vl"), ("tv", "qwen2_vl:torchvision"), ("kimi", "kimi_k25"),
          ("kimi_tv", "kimi_k25:torchvision")]
EXPECT = {"pil": ("qwen2_vl", "pil"), "tv": ("qwen2_vl", "torchvision"),
          "kimi": ("kimi_k25", "upstream"), "kimi_tv": ("kimi_k25", "torchvision")}


def test_parse_model_backend_suffix(tmp_path):
    assert parse_model("q=qwen2_vl:torchvision") == ("q", "qwen2_vl:torchvision")
    assert parse_model("qwen3_vl:torchvision") == ("qwen3_vl", "qwen3_vl:torchvision")
    folder = tmp_path / "a:b" / "Qwen2-VL"
    assert parse_model(f"{folder}:torchvision") == ("Qwen2-VL", f"{folder}:torchvision")
    # a colon in a folder's name stays part of it unless a backend's name follows
    assert split_backend(str(tmp_path / "x:y")) == (str(tmp_path / "x:y"), None)
    assert split_backend("kimi_k25:upstream") == ("kimi_k25", "upstream")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown backend 'tv'"):
        parse_model("q=qwen2_vl:tv")
    cfg = config_from_args([], environ={"SMG_FAST_MODELS": "a=qwen2_vl:torchvision,kimi_k25"})
    assert cfg.models == [("a", "qwen2_vl:torchvision"), ("kimi_k25", "kimi_k25")]


def test_a_backend_the_family_lacks_fails_to_start(start_server):
    with pytest.raises(ValueError, match="qwen2_vl has no 'upstream' backend"):
        start_server(models=[("q", "qwen2_vl:upstream")])


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): every model of MODELS."""
    return dict(models=MODELS)


def test_model_info_reports_the_backend(client):
    info = client.model_info()
    got = {m["name"]: m for m in info["models"]}
    for name, (family, backend) in EXPECT.items():
        cfg = smg_fast.load_processor(family, backend=backend).config
        assert got[name]["backend"] == backend and got[name]["source"] == family
        assert got[name]["config_fingerprint"] == cfg.fingerprint
    assert got["pil"]["config_fingerprint"] != got["tv"]["config_fingerprint"]


def test_each_model_computes_with_its_backend(client, small_jpegs):
    data = small_jpegs["chelsea"]
    outs = {}
    for name, (family, backend) in EXPECT.items():
        outs[name] = client.preprocess(data, model=name, transport="inline").items[0]
        ref = smg_fast.load_processor(family, backend=backend)(data)["pixel_values"]
        assert np.array_equal(outs[name].pixel_values, ref), name
    # the backends really differ here, so the equalities above tell them apart
    assert not np.array_equal(outs["pil"].pixel_values, outs["tv"].pixel_values)
    assert not np.array_equal(outs["kimi"].pixel_values, outs["kimi_tv"].pixel_values)


def test_torchvision_models_equal_transformers_torchvision(client, small_jpegs, tmp_path):
    import io

    from PIL import Image

    names = ["chelsea", "rocket"]
    imgs = [Image.open(io.BytesIO(small_jpegs[n])).convert("RGB") for n in names]
    qwen = dict(size={"shortest_edge": 3136, "longest_edge": 12845056}, patch_size=14,
                temporal_patch_size=2, merge_size=2)
    refs = run_oracle(tmp_path, [{"cls": "qwen", "kwargs": qwen, "images": [im]} for im in imgs]
                      + [{"cls": "kimi", "kwargs": KIMI_HUB, "images": [im]} for im in imgs])
    for i, n in enumerate(names):
        tv = client.preprocess(small_jpegs[n], model="tv", transport="inline").items[0]
        kimi = client.preprocess(small_jpegs[n], model="kimi_tv", transport="inline").items[0]
        assert np.array_equal(tv.pixel_values, refs[i]["pixel_values"]), n
        assert np.array_equal(kimi.pixel_values, refs[len(names) + i]["pixel_values"]), n


def test_verify_uses_the_matching_backend(client, small_jpegs):
    info = client.model_info()
    data = small_jpegs["chelsea"]
    for name in ("pil", "tv"):
        got = client.preprocess(data, model=name, transport="inline").items[0].pixel_values
        verdict = _verify(info, name, data, "float32", got)
        backend = EXPECT[name][1]
        assert verdict.startswith(f"identical to in-process ({backend})"), verdict
        if name == "pil":
            assert verdict.endswith("bit-exact with transformers (pil)"), verdict
        else:  # no torchvision in this environment: said, not compared with the PIL class
            assert "torchvision is not installed here" in verdict, verdict
            assert "bit-exact" not in verdict and "DIFFERS" not in verdict
    # the torchvision model's output is not what the PIL backend gives: --verify says so
    pil = client.preprocess(data, model="pil", transport="inline").items[0].pixel_values
    assert _verify(info, "tv", data, "float32", pil).startswith("DIFFERS from in-process")
    kimi = client.preprocess(data, model="kimi", transport="inline").items[0].pixel_values
    assert "upstream backend is Kimi-K2.5's own code" in _verify(info, "kimi", data,
                                                                   "float32", kimi)


def test_client_cli_verify_exit_status(server, small_jpegs, tmp_path, capsys):
    img = tmp_path / "chelsea.jpg"
    img.write_bytes(small_jpegs["chelsea"])
    for name in ("pil", "tv"):
        rc = client_main([str(img), "--target", server.target, "--model", name, "--verify",
                          "--transport", "inline"])
        out = capsys.readouterr().out
        assert rc == 0 and "identical to in-process" in out, out
