"""vLLM's own InternVL image path on pickled inputs, in the vLLM venv.

Runs under the venv's python (see tests/parity/test_internvl_vllm.py), never under pytest. Each
job is an image (a PIL image, or encoded bytes that vLLM's ImageMediaIO loads as its media
connector does: EXIF transpose, then RGB) and the processor's tile bounds; the output of
vLLM's InternVLChatImageProcessor (pixel_values_flat, image_num_patches) goes to .npy files."""

import pickle
import sys
from pathlib import Path

import numpy as np
from vllm.multimodal.image import convert_image_mode
from vllm.multimodal.media.image import ImageMediaIO
from vllm.transformers_utils.processors.internvl import InternVLChatImageProcessor


def main(workdir: Path) -> None:
    jobs = pickle.loads((workdir / "jobs.pkl").read_bytes())
    loader = ImageMediaIO(image_mode="RGB")
    for i, job in enumerate(jobs):
        image = job["image"]
        if isinstance(image, bytes):
            image = loader.load_bytes(image)
            image = getattr(image, "media", image)
        else:
            image = convert_image_mode(image, "RGB")
        proc = InternVLChatImageProcessor(image_size=448, min_dynamic_patch=job["min"],
                                          max_dynamic_patch=job["max"], dynamic_image_size=True,
                                          use_thumbnail=True)
        out = proc([image])
        np.save(workdir / f"{i}_pixel_values.npy", out["pixel_values_flat"].numpy())
        np.save(workdir / f"{i}_num_patches.npy", out["image_num_patches"].numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
