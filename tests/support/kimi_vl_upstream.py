"""Kimi-VL's remote-code image processor (KimiVLImageProcessor), step by step, in the oracle venv.

Its steps, written here from the published processor's behaviour (torch + torchvision 0.29.1,
Pillow): PIL BICUBIC resize in the image's own mode when the floor-divided patch grid passes
``in_token_limit``; torchvision's functional pad (zero fill, right and bottom) to a multiple of
merge x patch; ``to_tensor(image.convert("RGB"))``; torchvision's ``normalize``; row-major
[N, 3, P, P] patches; ``image_grid_hws``. Imported by tv_oracle_script.py (run by the venv's
python, never by pytest). Arrays are read as ``Image.fromarray`` reads them: the remote code
takes PIL images only.
"""

import math

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import functional as tvf

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class KimiVLUpstream:
    """KimiVLImageProcessor's numbers (pad_input=True, the hub configs' choice)."""

    backend = "torchvision"  # computed with torch and torchvision, as the remote code is

    def __init__(self, patch_size=14, pad_input=True, image_mean=CLIP_MEAN, image_std=CLIP_STD,
                 in_token_limit=4096, merge_kernel_size=(2, 2)):
        assert pad_input, "the oracle implements pad_input=True only"
        self.patch = patch_size
        self.mean, self.std = list(image_mean), list(image_std)
        self.limit = in_token_limit
        self.kernel = tuple(merge_kernel_size)

    def _sized(self, image):
        p = self.patch
        cells = (image.width // p) * (image.height // p)
        if cells > self.limit:
            factor = math.sqrt(self.limit / cells)
            image = image.resize((int(image.width * factor), int(image.height * factor)),
                                 Image.Resampling.BICUBIC)
        step_h, step_w = self.kernel[0] * p, self.kernel[1] * p
        right, bottom = -image.width % step_w, -image.height % step_h
        image = tvf.pad(image, [0, 0, right, bottom])
        if image.width // p >= 512 or image.height // p >= 512:
            raise ValueError("over the position embedding")
        return image

    def _one(self, image):
        if isinstance(image, np.ndarray):
            image = Image.fromarray(image)
        x = tvf.normalize(tvf.to_tensor(self._sized(image).convert("RGB")), self.mean, self.std)
        c, h, w = x.shape
        p = self.patch
        cells = x.reshape(c, h // p, p, w // p, p).permute(1, 3, 0, 2, 4)
        return cells.reshape(-1, c, p, p), (h // p, w // p)

    def __call__(self, images, return_tensors=None):
        parts = [self._one(im) for im in images]
        return {"pixel_values": torch.cat([pv for pv, _ in parts]),
                "image_grid_hws": torch.from_numpy(np.array([g for _, g in parts]))}
