"""transformers' video path on one clip, timed: run by bench/video.py under the torchvision venv.

PyAV decoding with transformers' own loader (``load_video(..., backend="pyav")`` with the video
processor's ``sample_frames`` as its sampling), then the video processor on the kept frames;
torch on TORCH_THREADS threads (``torch.set_num_threads``; 1 when not given). Prints one JSON line
(CPU and wall seconds per repetition, best; the decoding's and the processor's CPU seconds apart)
and saves pixel_values_videos to the given .npy path so bench/video.py can check exactness.

The loader's decoder threads are transformers' own, left as they are: its ``read_video_pyav``
(transformers 5.24.0) opens the file with ``av.open`` and sets no thread option, so PyAV's
defaults apply: ``thread_type`` SLICE with ``thread_count`` 0 (FFmpeg picks: 3 on a 2-core host,
cores + 1). Slice threads share out one frame's slices, so they help only on streams encoded
with several slices per frame (bench/video.py's clips have 2: x264's sliced threads); the RGB
conversion (``to_ndarray(format="rgb24")`` per kept frame, after decoding) runs on the calling
thread. TORCH_THREADS changes only the video processor's torch operations.

    <venv python> bench/video_reference.py CLIP.mp4 OUT.npy FAMILY FPS REPEATS [TORCH_THREADS]
"""

import json
import sys
import time
from functools import partial

import numpy as np
import torch
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.video_utils import load_video


def main(clip: str, out: str, family: str, fps: float, repeats: int,
         torch_threads: int = 1) -> None:
    """Times the path REPEATS times, saves the last output and prints the best timings."""
    torch.set_num_threads(torch_threads)
    cls = Qwen3VLVideoProcessor if family == "qwen3_vl" else Qwen2VLVideoProcessor
    proc = cls(cap_pixels_per_frame=False)
    best_cpu = best_wall = float("inf")
    decode_cpu = process_cpu = float("inf")
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        frames, meta = load_video(clip, backend="pyav",
                                  sample_indices_fn=partial(proc.sample_frames, fps=fps))
        c1 = time.process_time()
        pv = proc(frames, do_sample_frames=False, return_tensors="pt")["pixel_values_videos"]
        c2, w2 = time.process_time(), time.perf_counter()
        best_cpu, best_wall = min(best_cpu, c2 - c0), min(best_wall, w2 - w0)
        decode_cpu = min(decode_cpu, c1 - c0)
        process_cpu = min(process_cpu, c2 - c1)
    np.save(out, pv.numpy())
    print(json.dumps({"cpu": best_cpu, "wall": best_wall, "decode_cpu": decode_cpu,
                      "process_cpu": process_cpu, "frames": len(frames),
                      "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]) if len(sys.argv) > 6 else 1)
