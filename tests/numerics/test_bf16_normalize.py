"""The bfloat16 rescale + normalize table against torch's own bfloat16 arithmetic.

What transformers' Llama4ImageProcessor.rescale_and_normalize computes on each resized byte:
``image.to(torch.bfloat16) * rescale_factor``, then tvF.normalize's ``sub_(mean).div_(std)`` with
bfloat16 mean / std tensors, done here by torch (CPU) for every byte and channel and compared
with processors/bf16_normalize.py's table bit for bit, for the published values and others.
Also: the table is not the fused float32 formula rounded once (so the parity tests tell them
apart), and the float32 / float16 tables are its values widened as torch's ``.to`` does."""

from __future__ import annotations

import numpy as np
import pytest

from smg_fast import load_processor
from smg_fast.processors.bf16_normalize import bf16_table, table_of

torch = pytest.importorskip("torch")

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_rng = np.random.default_rng(7)
PARAMS = [(1 / 255, (0.5,) * 3, (0.5,) * 3), (1 / 255, CLIP_MEAN, CLIP_STD),
          (1 / 127.5, (1.0, 0.0, -0.25), (2.0, 0.125, 3.0)), (1.0, (0.0,) * 3, (1.0,) * 3),
          *[(float(_rng.uniform(1e-3, 0.05)), tuple(_rng.uniform(-1, 1, 3).tolist()),
             tuple(_rng.uniform(0.05, 2, 3).tolist())) for _ in range(6)]]


def torch_bits(rescale: float, mean, std) -> np.ndarray:
    """torch's bfloat16 result for each byte u (columns) and channel (rows), as uint16 bits."""
    u = torch.arange(256, dtype=torch.uint8).repeat(3, 1).reshape(3, 256, 1)
    x = u.to(torch.bfloat16) * rescale
    x = x.sub_(torch.tensor(mean, dtype=torch.bfloat16).reshape(3, 1, 1))
    x = x.div_(torch.tensor(std, dtype=torch.bfloat16).reshape(3, 1, 1))
    return x.reshape(3, 256).view(torch.int16).numpy().view(np.uint16)


@pytest.mark.parametrize("rescale,mean,std", PARAMS)
def test_table_equals_torch_bfloat16(rescale, mean, std):
    assert np.array_equal(bf16_table(rescale, mean, std), torch_bits(rescale, mean, std))


def test_table_is_not_the_fused_float32_formula():
    fused = np.asarray(load_processor("llava_onevision", backend="torchvision")
                       .pipeline("bfloat16").lut)  # mean / std 0.5, rescale 1/255 too
    assert (bf16_table(1 / 255, (0.5,) * 3, (0.5,) * 3) != fused).sum() > 100


@pytest.mark.parametrize("dtype,want", [("float32", torch.float32), ("float16", torch.float16)])
def test_wider_tables_are_the_values_widened(dtype, want):
    bits = bf16_table(1 / 255, CLIP_MEAN, CLIP_STD)
    widened = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).to(want)
    assert np.array_equal(table_of(bits, dtype), widened.numpy())


def test_bad_std_is_refused():
    with pytest.raises(ValueError, match="std"):
        bf16_table(1 / 255, (0.5,) * 3, (0.5, 0.0, 0.5))
    with pytest.raises(ValueError, match="std"):
        bf16_table(1 / 255, (0.5,) * 3, (0.5, float("inf"), 0.5))
