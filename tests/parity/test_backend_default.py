"""load_processor's backend for a model folder or hub id.

What transformers' Auto classes would resolve for it in an engine's environment (the torchvision
class a preprocessor_config.json names, or its PIL class), said in repr and one INFO line;
``backend=`` overrides; family names keep their default. Hub ids resolve through a Hugging Face
cache laid out by the test, or are downloaded from a fake hub the test serves on loopback."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class _FakeHub(BaseHTTPRequestHandler):
    """The hub's file endpoint (/{repo}/resolve/{revision}/{file}) for one repository."""

    files: dict[str, bytes] = {}
    commit = "fedcba9876543210fedcba9876543210fedcba98"
    served: list[str] = []

    def _answer(self, body: bool) -> None:
        name = self.path.rsplit("/", 1)[-1]
        data = self.files.get(self.path.split("/resolve/")[0].strip("/") + "/" + name)
        self.served.append(f"{self.command} {self.path}")
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", self.commit)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def log_message(self, *args) -> None:
        pass


_LOAD = """
import sys, smg_fast
try:
    proc = smg_fast.load_processor(sys.argv[1])
    print("OK", proc.config.family, proc.config.backend, proc.config.max_pixels)
except ValueError as exc:
    print("ValueError", exc)
"""


def test_hub_id_fetched_and_rechecked_online_cached_offline(tmp_path):
    """Fetched from the hub (HF_ENDPOINT, a fake one) and re-checked online; offline: the cache."""
    pre = json.dumps({**QWEN2_HUB, "image_processor_type": "Qwen2VLImageProcessorPil",
                      "max_pixels": 1003520}).encode()
    _FakeHub.files = {"Org/Tiny-VL/preprocessor_config.json": pre,
                      "Org/Tiny-VL/config.json": json.dumps({"model_type": "qwen2_vl"}).encode(),
                      "Org/No-Config-VL/preprocessor_config.json": pre,
                      # transformers 5's save format: the settings nested in processor_config.json
                      "Org/Nested-VL/processor_config.json": json.dumps(
                          {"image_processor": json.loads(pre)}).encode(),
                      "Org/Nested-VL/config.json": json.dumps({"model_type": "qwen2_vl"}).encode()}
    _FakeHub.served = []
    _FakeHub.commit = "fedcba9876543210fedcba9876543210fedcba98"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
               "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "0",
               "HF_HUB_DISABLE_TELEMETRY": "1"}

        def load(repo: str, **extra: str) -> str:
            return subprocess.run([sys.executable, "-c", _LOAD, repo], env={**env, **extra},
                                  capture_output=True, text=True, timeout=120).stdout.strip()

        assert load("Org/Tiny-VL", HF_HUB_OFFLINE="1").startswith(
            "ValueError 'Org/Tiny-VL' is not in the local Hugging Face cache")
        assert not _FakeHub.served  # offline: not even asked
        assert load("Org/Tiny-VL") == "OK qwen2_vl pil 1003520"
        assert any("Org/Tiny-VL/resolve/main/preprocessor_config.json" in r
                   for r in _FakeHub.served)
        assert load("Org/Tiny-VL", HF_HUB_OFFLINE="1") == "OK qwen2_vl pil 1003520"  # now cached
        assert load("Org/No-Config-VL") == "OK qwen2_vl pil 1003520"
        assert load("Org/Nested-VL") == "OK qwen2_vl pil 1003520"
        assert load("Org/Nested-VL", HF_HUB_OFFLINE="1") == "OK qwen2_vl pil 1003520"
        missing = load("Org/Missing-VL")
        assert missing.startswith("ValueError 'Org/Missing-VL' could not be read"), missing
        assert "fetching its preprocessor_config.json failed" in missing and "404" in missing
        # online, a cached id is checked against the hub: a changed config is fetched again
        _FakeHub.files["Org/Tiny-VL/preprocessor_config.json"] = json.dumps(
            {**QWEN2_HUB, "image_processor_type": "Qwen2VLImageProcessorPil",
             "max_pixels": 2007040}).encode()
        _FakeHub.commit = "00112233445566778899aabbccddeeff00112233"
        assert load("Org/Tiny-VL") == "OK qwen2_vl pil 2007040"
    finally:
        server.shutdown()
        server.server_close()
    # the hub unreachable: the cached copy, as transformers falls back to it
    assert load("Org/Tiny-VL") == "OK qwen2_vl pil 2007040"
    assert load("Org/Missing-VL").startswith("ValueError 'Org/Missing-VL' could not be read")
