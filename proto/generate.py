"""Regenerates the committed Python stubs in src/smg_fast/_proto/ from proto/smg_fast/v1/*.proto.

    pip install grpcio-tools && python proto/generate.py

protoc names modules after the proto paths (``smg_fast.v1.tensor_pb2``); the stubs live flat in
the private package ``smg_fast._proto``, so the cross-file imports are rewritten to relative ones.
The descriptors keep their proto file names (``smg_fast/v1/*.proto``), which reflection serves.
tests/package/test_proto_stubs.py regenerates into a temporary folder (in a separate process:
grpc_tools' protoc crashes a process that has loaded NIXL 1.5.1's libraries) and fails if the
committed stubs differ.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_DIR = PROTO_ROOT / "smg_fast" / "v1"
STUB_DIR = ROOT / "src" / "smg_fast" / "_proto"
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")

_IMPORT = re.compile(r"^from smg_fast\.v1 import (\w+_pb2) as", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    """Writes the stubs for every proto file into out_dir (flat); returns the written paths."""
    from grpc_tools import protoc

    protos = sorted(PROTO_DIR.glob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"--python_out={tmp}",
                f"--pyi_out={tmp}", f"--grpc_python_out={tmp}",
                *(str(p.relative_to(PROTO_ROOT)) for p in protos)]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed: " + " ".join(args))
        written = []
        out_dir.mkdir(parents=True, exist_ok=True)
        for src in sorted((Path(tmp) / "smg_fast" / "v1").iterdir()):
            if not src.name.endswith(SUFFIXES):
                continue
            text = _IMPORT.sub(r"from . import \1 as", src.read_text())
            dst = out_dir / src.name
            dst.write_text(text)
            written.append(dst)
    return written


def main(argv: list[str]) -> int:
    """``python proto/generate.py [OUT_DIR]`` (default: the committed stub folder)."""
    out = Path(argv[0]) if argv else STUB_DIR
    for path in generate(out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
