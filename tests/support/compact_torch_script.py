"""smg_fast.expand on torch tensors, in the torchvision oracle venv (torch is optional in ours).

Runs under the venv's python (tests/numerics/test_compact_torch.py), never under pytest, with
smg_fast importable. For every family, backend and float dtype on one image: the compact output
with return_tensors="pt" expands (natively on CPU; by the device gather, run here on CPU; and on
CUDA when there is one) to exactly the full path's tensor; a family the format does not describe
(compact_exact False) refuses it. Prints one JSON object: {case: true | false | "error text"}.
"""

import json
import sys

import numpy as np
import torch

import smg_fast
from smg_fast.compact import CompactTensor, gather
from smg_fast.errors import CompactFormatError
from smg_fast.processors.registry import get_family


def cases(image):
    """Yields (case name, result tensor, expected tensor)."""
    for name in smg_fast.FAMILIES:
        for backend in get_family(name).backends:
            proc = smg_fast.load_processor(name, backend=backend)
            if proc.zero_rows:  # literal zero padding: carried where pixel 0 maps to +0.0
                proc = smg_fast.load_processor(name, backend=backend, image_mean=[0.0] * 3)
            for dtype in ("float32", "bfloat16", "float16"):
                key = f"{name}/{backend}/{dtype}"
                full = proc(image, dtype=dtype, return_tensors="pt")["pixel_values"]
                if not proc.compact_exact:
                    try:
                        proc(image, dtype=dtype, encoding="uint8+lut", return_tensors="pt")
                        refused = False
                    except CompactFormatError:
                        refused = True
                    yield key + "/refused", torch.tensor(refused), torch.tensor(True)
                    continue
                c = proc(image, dtype=dtype, encoding="uint8+lut", return_tensors="pt")
                c = c["pixel_values"]
                yield key + "/cpu", smg_fast.expand(c), full
                out = torch.empty_like(full)
                yield key + "/cpu-out", smg_fast.expand(c, out=out), full
                yield key + "/gather", gather(c.codes, c.lut, c.run).view(full.shape), full
                np_c = proc(image, dtype=dtype, encoding="uint8+lut")["pixel_values"]
                mixed = CompactTensor(torch.from_numpy(np.asarray(np_c.codes)), np_c.lut, dtype,
                                      np_c.run)
                yield key + "/numpy-table", smg_fast.expand(mixed), full
                if torch.cuda.is_available():
                    dev = CompactTensor(c.codes.cuda(), c.lut, dtype, c.run)
                    yield key + "/cuda", smg_fast.expand(dev).cpu(), full


def main(path: str) -> None:
    image = open(path, "rb").read()
    results = {}
    for key, got, want in cases(image):
        try:
            results[key] = bool(got.dtype == want.dtype and torch.equal(got, want))
        except Exception as exc:  # noqa: BLE001 - reported per case
            results[key] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
