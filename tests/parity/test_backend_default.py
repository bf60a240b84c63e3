"""load_processor's backend for a model folder or hub id.

What transformers' Auto classes would resolve for it in an engine's environment (the torchvision
class a preprocessor_config.json names, or its PIL class), said in repr and one INFO line;
``backend=`` overrides; family names keep their default. Hub ids resolve through a Hugging Face
cache laid out by the test (never the network)."""

from __future__ import annotations

import json
import logging

import pytest

import smg_fast

QWEN2_HUB = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
             "temporal_patch_size": 2, "merge_size": 2,
             "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711]}
KIMI = {"media_proc_cfg": {"in_patch_limit": 16384, "patch_size": 14, "merge_kernel_size": 2,
                           "patch_limit_on_one_side": 512, "image_mean": [0.5] * 3,
                           "image_std": [0.5] * 3}}


def write_folder(path, pre, model_type="qwen2_vl"):
    path.mkdir(parents=True, exist_ok=True)
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.mark.parametrize("named, backend", [
    ("Qwen2VLImageProcessor", "torchvision"), ("Qwen2VLImageProcessorFast", "torchvision"),
    ("Qwen2VLImageProcessorPil", "pil"), (None, "torchvision"),
])
def test_folder_backend_is_what_transformers_resolves(named, backend, tmp_path, caplog):
    pre = dict(QWEN2_HUB, **({"image_processor_type": named} if named else {}))
    folder = write_folder(tmp_path / "m", pre)
    with caplog.at_level(logging.INFO, logger="smg_fast"):
        proc = smg_fast.load_processor(folder)
    assert proc.config.backend == backend
    assert f"backend={backend!r}" in repr(proc) and (named or "names no class") in repr(proc)
    lines = [r.getMessage() for r in caplog.records if "uses backend" in r.getMessage()]
    assert len(lines) == 1 and repr(backend) in lines[0]
    other = "pil" if backend == "torchvision" else "torchvision"
    assert smg_fast.load_processor(folder, backend=other).config.backend == other
    assert "backend= given" in repr(smg_fast.load_processor(folder, backend=other))


def test_family_names_and_kimi_keep_their_defaults(tmp_path):
    assert smg_fast.load_processor("qwen2_vl").config.backend == "pil"
    assert smg_fast.load_processor("kimi_k25").config.backend == "upstream"
    kimi = write_folder(tmp_path / "kimi", KIMI, "kimi_k25")
    assert smg_fast.load_processor(kimi).config.backend == "upstream"
    write_folder(kimi, {**KIMI, "image_processor_type": "Kimi_K25ImageProcessor"}, "kimi_k25")
    assert smg_fast.load_processor(kimi).config.backend == "torchvision"


def _cached_snapshot(cache, repo_id, pre):
    """huggingface_hub's cache layout: refs/main names the snapshot holding the files."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return write_folder(repo / "snapshots" / commit, pre)


def test_hub_id_from_the_local_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    _cached_snapshot(cache, "Qwen/Qwen2-VL-7B-Instruct",
                     {**QWEN2_HUB, "image_processor_type": "Qwen2VLImageProcessor"})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    proc = smg_fast.load_processor("Qwen/Qwen2-VL-7B-Instruct")
    assert proc.config.backend == "torchvision" and proc.config.max_pixels == 12845056
    with pytest.raises(ValueError, match="not in the local Hugging Face cache"):
        smg_fast.load_processor("Qwen/Not-Cached-Model")
