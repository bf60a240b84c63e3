"""mistral_common's image encoder and OpenCV's cubic resize on pickled inputs, in the vLLM venv.

Runs under the venv's python (see tests/parity/test_pixtral_mistral.py and
tests/numerics/test_opencv_cubic.py), never under pytest, with Intel IPP switched off in OpenCV
(cv2.ipp.setUseIPP(False)): the path smg-fast reproduces. Jobs: {"resize": array, "size":
(w, h)} is cv2.resize(array, size, INTER_CUBIC); {"normalize": array} is mistral_common's
normalize of a float32 (H, W, 3) array; {"encode": PIL image, "config": (patch, max size,
merge)} is ImageEncoder's (image, tokens). Outputs go to .npy files."""

import pickle
import sys
from pathlib import Path

import cv2
import numpy as np
from mistral_common.protocol.instruct.chunk import ImageChunk
from mistral_common.tokens.tokenizers.image import (
    DATASET_MEAN,
    DATASET_STD,
    ImageConfig,
    ImageEncoder,
    SpecialImageIDs,
    normalize,
)

IDS = SpecialImageIDs(img=10, img_break=12, img_end=13)  # the ids tekken.json names


def main(workdir: Path) -> None:
    cv2.ipp.setUseIPP(False)
    assert not cv2.ipp.useIPP()
    jobs = pickle.loads((workdir / "jobs.pkl").read_bytes())
    for i, job in enumerate(jobs):
        if "resize" in job:
            out = cv2.resize(job["resize"], tuple(job["size"]), interpolation=cv2.INTER_CUBIC)
            np.save(workdir / f"{i}_out.npy", out)
        elif "normalize" in job:
            out = normalize(job["normalize"], DATASET_MEAN, DATASET_STD)
            np.save(workdir / f"{i}_out.npy", out)
        else:
            patch, most, merge = job["config"]
            encoder = ImageEncoder(ImageConfig(patch, most, merge), IDS)
            enc = encoder(ImageChunk(image=job["encode"]))
            np.save(workdir / f"{i}_out.npy", enc.image)
            np.save(workdir / f"{i}_tokens.npy", np.asarray(enc.tokens, dtype=np.int64))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
