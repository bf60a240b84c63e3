"""transformers' video processors on pickled videos, in the torchvision oracle venv.

Runs under the venv's python (tests/video/video_oracle.py starts it), never under pytest.
Encoded videos are decoded by transformers' own ``load_video`` (PyAV backend, every frame), then
the processor samples and processes them with the loader's metadata; frame videos go to the
processor as they are. Outputs as .npy files.
"""

import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.video_utils import VideoMetadata, load_video

CLASSES = {"qwen2": Qwen2VLVideoProcessor, "qwen3": Qwen3VLVideoProcessor}


def main(workdir: Path) -> None:
    torch.set_num_threads(1)
    jobs = pickle.loads((workdir / "jobs.pkl").read_bytes())
    for i, job in enumerate(jobs):
        proc = CLASSES[job["cls"]](**job["kwargs"])
        if "samples" in job:  # sample_frames alone: indices per (total, rate, options), -1: raised
            found, sizes = [], []
            for total, rate, options in job["samples"]:
                try:
                    got = proc.sample_frames(VideoMetadata(total_num_frames=total, fps=rate),
                                             **options)
                except (ValueError, ZeroDivisionError):
                    sizes.append(-1)
                    continue
                got = np.asarray(got, np.int64)
                found.append(got)
                sizes.append(len(got))
            np.save(workdir / f"{i}_indices.npy", np.concatenate(found or [np.zeros(0, np.int64)]))
            np.save(workdir / f"{i}_sizes.npy", np.asarray(sizes, np.int64))
            continue
        call = dict(job["call"])
        video = job["video"]
        if isinstance(video, bytes):
            with tempfile.NamedTemporaryFile(suffix=".mp4") as fh:
                fh.write(video)
                fh.flush()
                video, meta = load_video(fh.name, backend="pyav")
            call["video_metadata"] = meta
        out = proc(video, return_tensors="pt", return_metadata=True, **call)
        pv = out["pixel_values_videos"]
        assert pv.dtype == torch.float32, pv.dtype
        np.save(workdir / f"{i}_pixel_values.npy", pv.numpy())
        np.save(workdir / f"{i}_grid.npy", out["video_grid_thw"].numpy())
        meta = out["video_metadata"][0]
        np.save(workdir / f"{i}_indices.npy", np.asarray(meta.frames_indices, np.int64))
        np.save(workdir / f"{i}_fps.npy", np.asarray(meta.fps if meta.fps else -1.0))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
