"""smg_fast.expand on torch tensors, in the torchvision oracle venv (torch is optional in ours).

Runs under the venv's python (tests/numerics/test_compact_torch.py), never under pytest, with
smg_fast importable. For every family, backend and float dtype on one image: the compact output
with return_tensors="pt" expands (natively on CPU; by the device gather, run here on CPU; and on
CUDA when there is one) to exactly the full path's tensor; a family the format does not describe
(compact_exact False) refuses it. The float32-only backends (FLOAT32_ONLY) must refuse the other
dtypes; Pixtral's upstream backend (mistral_common's numerics) reads the image decoded by Pillow.
Prints one JSON object: {case: true | false | "error text"}.
"""

import io
import json
import sys

import numpy as np
import torch

import smg_fast
from smg_fast.compact import CompactTensor, gather
from smg_fast.errors import CompactFormatError, UnsupportedCallError
from smg_fast.processors.registry import get_family

FLOAT32_ONLY = {("pixtral", "upstream"), ("phi4_multimodal", "torchvision")}


def refuses(error, proc, image, **options):
    """Whether proc(image, **options) raises error."""
    try:
        proc(image, return_tensors="pt", **options)
    except error:
        return True
    return False


def cases(data):
    """Yields (case name, result tensor, expected tensor)."""
    from PIL import Image

    for name in smg_fast.FAMILIES:
        for backend in get_family(name).backends:
            proc = smg_fast.load_processor(name, backend=backend)
            if proc.zero_rows:  # literal zero padding: carried where pixel 0 maps to +0.0
                proc = smg_fast.load_processor(name, backend=backend, image_mean=[0.0] * 3)
            mistral = name == "pixtral" and backend == "upstream"
            image = Image.open(io.BytesIO(data)) if mistral else data
            for dtype in ("float32", "bfloat16", "float16"):
                key = f"{name}/{backend}/{dtype}"
                if (name, backend) in FLOAT32_ONLY and dtype != "float32":
                    refused = refuses(UnsupportedCallError, proc, image, dtype=dtype)
                    yield key + "/refused", torch.tensor(refused), torch.tensor(True)
                    continue
                full = proc(image, dtype=dtype, return_tensors="pt")["pixel_values"]
                if not proc.compact_exact:
                    refused = refuses(CompactFormatError, proc, image, dtype=dtype,
                                      encoding="uint8+lut")
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
