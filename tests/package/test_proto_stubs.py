"""The committed gRPC stubs are what proto/generate.py makes.

The stubs in src/smg_fast/_proto/ are compared with ones regenerated from the .proto files into a
temporary folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grpc_tools")

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "src" / "smg_fast" / "_proto"

# Lines naming the generator's version: a newer grpcio-tools alone does not make stubs stale.
_VERSION_LINES = re.compile(
    r"^(# Protobuf Python Version: .*|GRPC_GENERATED_VERSION = .*|    \d+,)$", re.MULTILINE)


def _generate(out_dir: Path) -> list[Path]:
    """Runs proto/generate.py into out_dir, in its own process, and lists what it wrote.

    Its own process: grpc_tools' bundled protobuf crashes a process that already loaded NIXL's
    native libraries (as the RDMA tests do)."""
    subprocess.run([sys.executable, str(ROOT / "proto" / "generate.py"), str(out_dir)],
                   check=True, timeout=120)
    return sorted(out_dir.iterdir())


def _normalize(text: str) -> str:
    return _VERSION_LINES.sub("<version>", text)


def test_committed_stubs_are_fresh(tmp_path):
    written = _generate(tmp_path)
    assert written, "no stubs generated"
    fresh = {p.name: p.read_text() for p in written}
    committed = {p.name: p.read_text() for p in STUBS.iterdir()
                 if p.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"))}
    assert sorted(fresh) == sorted(committed), "stub files differ: run python proto/generate.py"
    stale = [n for n in fresh if _normalize(fresh[n]) != _normalize(committed[n])]
    assert not stale, f"stale stubs {stale}: run python proto/generate.py"


def test_stubs_match_the_spec():
    from smg_fast._proto import preprocessor_pb2 as pb
    from smg_fast._proto import tensor_pb2 as tp

    def numbers(msg):
        return {f.name: f.number for f in msg.DESCRIPTOR.fields}

    assert numbers(tp.TensorData) == {"shape": 1, "dtype": 2, "inline": 3, "shm": 4, "remote": 5,
                                      "encoding": 6, "lut": 7}
    assert numbers(tp.LutTable) == {"dtype": 1, "table": 2, "run": 3}
    assert numbers(tp.ShmHandle) == {"name": 1, "offset": 2, "nbytes": 3, "owner_id": 4}
    assert numbers(tp.RemoteTensorHandle) == {"transport": 1, "descriptor": 2, "nbytes": 3}
    assert numbers(pb.MediaItem) == {"data": 1, "url": 2, "video": 3}
    assert numbers(pb.VideoOptions) == {"do_sample_frames": 1, "fps": 2, "num_frames": 3,
                                        "min_frames": 4, "max_frames": 5, "min_pixels": 6,
                                        "max_pixels": 7, "decoder": 8}
    assert numbers(pb.VideoInfo) == {"frames_indices": 1, "fps": 2, "total_num_frames": 3,
                                     "duration": 4, "width": 5, "height": 6, "timestamps": 7,
                                     "decoder": 8}
    req = numbers(pb.PreprocessRequest)
    assert {k: req[k] for k in ("request_id", "model", "items", "dtype", "transport",
                                "shm_namespace", "encoding")} == {
        "request_id": 1, "model": 2, "items": 3, "dtype": 4, "transport": 5, "shm_namespace": 6,
        "encoding": 9}
    item = numbers(pb.ProcessedItem)
    assert {k: item[k] for k in ("pixel_values", "grid_thw", "num_tokens", "content_hash",
                                 "cache_hit", "video")} == {
        "pixel_values": 1, "grid_thw": 2, "num_tokens": 3, "content_hash": 4, "cache_hit": 5,
        "video": 7}
    assert pb.DESCRIPTOR.package == "smg_fast.v1"
    assert set(pb.DESCRIPTOR.services_by_name["Preprocessor"].methods_by_name) == {
        "Preprocess", "GetModelInfo"}
