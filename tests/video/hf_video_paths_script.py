"""transformers' Qwen video processors on a video path against smg_fast.hf_video's, in a venv.

Runs under the vLLM venv's python (transformers, torchvision and torchcodec 0.17 there; started
by tests/video/test_hf_video_paths.py with smg_fast on the path), never under pytest. Per case:
transformers' class decodes the path in ``fetch_videos`` with torchcodec; the drop-in must
compute the call itself (no hand-over logged) and return identical tensors and metadata.
Prints one JSON line: per case, whether they are identical and what the drop-in logged; and
the exception types both raise for inputs transformers refuses (a path object, a list of them, a
path of no file).
"""

import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

from smg_fast import hf_video

CASES = [("qwen2", {"do_sample_frames": True, "fps": 8}), ("qwen2", {}), ("qwen3", {})]


class Captured(logging.Handler):
    """Keeps every record's message."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main(paths: list[str]) -> None:
    torch.set_num_threads(1)
    captured = Captured()
    logging.getLogger().addHandler(captured)
    logging.getLogger().setLevel(logging.INFO)
    ours = {"qwen2": hf_video.Qwen2VLVideoProcessor, "qwen3": hf_video.Qwen3VLVideoProcessor}
    theirs = {"qwen2": Qwen2VLVideoProcessor, "qwen3": Qwen3VLVideoProcessor}
    out = []
    for path in paths:
        for cls, call in CASES:
            want = theirs[cls]()(videos=[path], return_tensors="pt", return_metadata=True, **call)
            got = ours[cls]()(videos=[path], return_tensors="pt", return_metadata=True, **call)
            same = all(np.array_equal(got[k].numpy(), want[k].numpy())
                       for k in ("pixel_values_videos", "video_grid_thw"))
            gm, wm = got["video_metadata"][0], want["video_metadata"][0]
            out.append({"path": path, "cls": cls, "call": call, "same": bool(same),
                        "indices": [list(map(int, gm.frames_indices)),
                                    list(map(int, wm.frames_indices))],
                        "fps": [gm.fps, wm.fps],
                        "total": [gm.total_num_frames, wm.total_num_frames]})
    logged = list(captured.lines)  # the computed cases' lines (the refused are handed over)
    refused = [_raised(theirs["qwen2"](), ours["qwen2"](), videos)
               for videos in (Path(paths[0]), [Path(paths[0])], paths[0] + ".absent")]
    print(json.dumps({"cases": out, "logged": logged, "refused": refused}))


def _raised(theirs: Any, ours: Any, videos: Any) -> list[str]:
    """The exception type each class's call raises for videos (or "returned")."""
    names = []
    for proc in (theirs, ours):
        try:
            proc(videos=videos, return_tensors="pt")
            names.append("returned")
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            names.append(type(exc).__name__)
    return names


if __name__ == "__main__":
    main(sys.argv[1:])
