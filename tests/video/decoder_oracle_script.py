"""torchcodec's and OpenCV's frames and metadata for pickled clips, in the vLLM venv.

Runs under the vLLM venv's python (tests/video/test_video_decoders.py starts it), never under
pytest. Per job (encoded bytes, frame indices): torchcodec as transformers' torchcodec reader
opens a video (``seek_mode="exact"``, FFmpeg's thread count) and its ``get_frames_at``; OpenCV
as vLLM's OpenCV loader reads one (``cv2.VideoCapture`` over the bytes with the FFmpeg backend,
``grab()`` every frame in order, ``retrieve()`` the kept ones, BGR to RGB). Outputs as .npy.
"""

import io
import pickle
import sys
from pathlib import Path

import cv2
import numpy as np
from torchcodec.decoders import VideoDecoder


def torchcodec_frames(data: bytes, indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(n, H, W, 3) frames at indices and [total frames, average fps, duration]."""
    dec = VideoDecoder(data, seek_mode="exact", num_ffmpeg_threads=0, device="cpu")
    meta = dec.metadata
    frames = dec.get_frames_at(indices=indices).data.permute(0, 2, 3, 1).contiguous().numpy()
    return frames, np.array([meta.num_frames, meta.average_fps, meta.duration_seconds])


def opencv_frames(data: bytes, indices: list[int]) -> np.ndarray:
    """(n, H, W, 3) RGB frames at indices (sorted, distinct), read in order."""
    buf = io.BytesIO(data)
    cap = cv2.VideoCapture(buf, cv2.CAP_FFMPEG, [])
    assert cap.isOpened()
    wanted, out, i = set(indices), [], 0
    while cap.grab():  # to the end (this build crashed releasing a buffer capture mid-stream)
        if i in wanted:
            ok, bgr = cap.retrieve()
            assert ok
            out.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        i += 1
    del cap
    return np.stack(out)


def main(workdir: Path) -> None:
    jobs = pickle.loads((workdir / "jobs.pkl").read_bytes())
    for i, job in enumerate(jobs):
        frames, meta = torchcodec_frames(job["video"], job["indices"])
        np.save(workdir / f"{i}_torchcodec.npy", frames)
        np.save(workdir / f"{i}_torchcodec_meta.npy", meta)
        np.save(workdir / f"{i}_opencv.npy", opencv_frames(job["video"], job["indices"]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
