"""TensorData's "uint8+lut" encoding on inline and shm payloads.

Read back exactly, and refused (TensorError, before the payload is read) when malformed or
unknown."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from smg_fast import CompactTensor, expand  # noqa: E402
from smg_fast.transport import TensorError  # noqa: E402
from smg_fast.transport.encoding import set_encoding  # noqa: E402
from smg_fast.transport.tensors import read_tensor, to_tensor_data  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def _compact(ours, real_images, dtype: str) -> tuple[CompactTensor, np.ndarray]:
    proc = ours("qwen2_5_vl", max_pixels=300_000)
    img = real_images.rgb_array("coffee")
    return (proc(img, dtype=dtype, encoding="uint8+lut")["pixel_values"],
            proc(img, dtype=dtype)["pixel_values"])


@pytest.mark.parametrize("transport", ["inline", "shm"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_round_trip(transport, dtype, ours, real_images):
    c, full = _compact(ours, real_images, dtype)
    td = to_tensor_data(c.codes, transport=transport)
    set_encoding(td, c.dtype, c.lut, c.run)
    wire = type(td).FromString(td.SerializeToString())
    got = read_tensor(wire, unlink=False)
    assert isinstance(got, CompactTensor) and (got.dtype, got.run) == (dtype, c.run)
    assert np.array_equal(expand(got).view(np.uint8), full.view(np.uint8))
    assert np.array_equal(read_tensor(wire, expand=True).view(np.uint8), full.view(np.uint8))


def test_malformed_or_unknown_encodings_are_refused(ours, real_images):
    c, _ = _compact(ours, real_images, "float32")

    def make(**change):
        td = to_tensor_data(c.codes)
        set_encoding(td, c.dtype, c.lut, c.run)
        for k, v in change.items():
            if k == "encoding":
                td.encoding = v
            elif k == "dtype":
                td.dtype = v
            else:
                setattr(td.lut, k, v)
        return td

    for change, words in [({"encoding": "uint4+lut"}, "unknown TensorData encoding"),
                          ({"dtype": "float32"}, "carries uint8 codes"),
                          ({"dtype": "float64"}, "carries uint8 codes"),
                          ({"table": b"\0" * 100}, "table holds 100 bytes"),
                          ({"run": 0}, "run 0"),
                          ({"run": c.codes.size}, f"run {c.codes.size}")]:
        with pytest.raises(TensorError, match=words):
            read_tensor(make(**change))
    td = make()
    td.lut.dtype = "int32"
    with pytest.raises(TensorError, match="table dtype"):
        read_tensor(td)
    # a refused table leaves the shm payload alone: the segment is still there to read
    td = to_tensor_data(c.codes, transport="shm")
    set_encoding(td, "float32", c.lut, c.run)
    td.lut.run = c.codes.size
    with pytest.raises(TensorError, match=f"run {c.codes.size}"):
        read_tensor(td)
    td.lut.run = c.run
    assert isinstance(read_tensor(td), CompactTensor)
