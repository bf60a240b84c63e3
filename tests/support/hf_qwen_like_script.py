"""smg_fast.hf's PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR classes against transformers' own.

Runs under the torchvision oracle venv's python, never under pytest, with smg_fast on PYTHONPATH
(tests/engines/test_hf_qwen_like.py): each family's torchvision and PIL drop-in, built with no
arguments (the class defaults) and from the hub config, on every input kind of one call, and
get_number_of_image_patches. Prints one JSON object: {case: true | false | "error text"}."""

import json
import sys
import warnings

import numpy as np
import torch
from PIL import Image

import smg_fast.hf as sh
from smg_fast.testing.oracles import QWEN_LIKE_CLASSES, qwen_like_kwargs, qwen_like_reference

warnings.simplefilter("ignore")
torch.set_num_threads(1)


def same(a, b) -> bool:
    """Equal keys, types, dtypes, shapes and values (BatchFeature or plain values)."""
    if not hasattr(a, "keys"):
        return type(a) is type(b) and a == b
    if sorted(a.keys()) != sorted(b.keys()):
        return False
    return all(type(a[k]) is type(b[k]) and a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
               and np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def outcome(ref, ours, args: tuple, kwargs: dict):
    """Whether both calls give the same result, or the error either raised (the test fails)."""
    try:
        return same(ref(*args, **kwargs), ours(*args, **kwargs))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def main(photo: str) -> None:
    rgb = np.asarray(Image.open(photo).convert("RGB"))[:233, :301]
    inputs = {"numpy_hwc": rgb, "pil": Image.fromarray(rgb),
              "torch_chw": torch.from_numpy(rgb.copy()).permute(2, 0, 1),
              "grey": Image.fromarray(rgb[:, :, 0]), "thin": rgb[:9, :250],
              "nested": [[rgb], [rgb[:120, :200], rgb[:64]]]}
    result: dict = {}
    for fam, (_, name) in QWEN_LIKE_CLASSES.items():
        for backend, suffix in (("torchvision", ""), ("pil", "Pil")):
            ours_cls = getattr(sh, name + suffix)
            hub = (qwen_like_reference(fam, backend), ours_cls(**qwen_like_kwargs(fam)))
            bare = (type(hub[0])(), ours_cls())
            for label, (ref, ours) in (("hub", hub), ("defaults", bare)):
                calls = {kind: ((img,), {"return_tensors": "pt"}) for kind, img in inputs.items()}
                calls["none"] = ((rgb,), {"return_tensors": None})
                for kind, (args, kwargs) in calls.items():
                    result[f"{fam}/{backend}/{label}/{kind}"] = outcome(ref, ours, args, kwargs)
                result[f"{fam}/{backend}/{label}/patches"] = outcome(
                    ref.get_number_of_image_patches, ours.get_number_of_image_patches,
                    (1080, 1920, {"max_pixels": 300_000}), {})
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
