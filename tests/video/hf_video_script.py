"""smg_fast.hf_video's classes against transformers' own, in the torchvision venv.

Run by tests/video/test_hf_video.py with smg_fast importable; prints one JSON line: per case,
whether pixel_values_videos, video_grid_thw and the metadata's indices are equal, and whether
the outputs are torch tensors as transformers' are, and whether smg-fast computed them."""

import copy
import json
import logging
import sys

import av
import numpy as np
import torch
from transformers.models.qwen2_vl.video_processing_qwen2_vl import (
    Qwen2VLVideoProcessor as HF2,
)
from transformers.models.qwen3_vl.video_processing_qwen3_vl import (
    Qwen3VLVideoProcessor as HF3,
)

from smg_fast import hf_video


def frames_of(path: str) -> tuple[np.ndarray, dict]:
    with av.open(path) as c:
        arr = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
        rate = float(c.streams.video[0].average_rate)
    return arr, {"total_num_frames": len(arr), "fps": rate}


def indices(out: dict) -> list:
    """Each video's frames_indices as ints (None where the metadata has none)."""
    return [None if m.frames_indices is None else list(map(int, m.frames_indices))
            for m in out["video_metadata"]]


def main(clip: str) -> None:
    torch.set_num_threads(1)
    frames, meta = frames_of(clip)
    cases = {
        "qwen2-frames": (HF2, hf_video.Qwen2VLVideoProcessor, {}, frames, {}),
        "qwen2-sampled": (HF2, hf_video.Qwen2VLVideoProcessor, {"min_pixels": 3136},
                          frames, {"do_sample_frames": True, "fps": 2, "video_metadata": meta}),
        "qwen2-tensor": (HF2, hf_video.Qwen2VLVideoProcessor, {}, torch.from_numpy(frames[:5]),
                         {"return_tensors": "pt"}),
        "qwen3-defaults": (HF3, hf_video.Qwen3VLVideoProcessor, {}, frames,
                           {"video_metadata": meta}),
        "qwen3-no-meta": (HF3, hf_video.Qwen3VLVideoProcessor, {}, [frames, frames[:9]], {}),
        # frames sampled by the caller (SGLang): its indices are the metadata's, kept unsampled
        "qwen3-presampled": (HF3, hf_video.Qwen3VLVideoProcessor, {}, frames[::3],
                             {"do_sample_frames": False, "video_metadata": {
                                 **meta, "frames_indices": list(range(0, len(frames), 3))}}),
        "qwen3-num-frames": (HF3, hf_video.Qwen3VLVideoProcessor, {"cap_pixels_per_frame": True},
                             frames, {"num_frames": 6, "fps": None}),
        # vLLM's calls: uint8 patches (normalized on its device); Qwen3-VL's nested batch with
        # metadata that names no frame size
        "qwen2-uint8": (HF2, hf_video.Qwen2VLVideoProcessor, {}, [frames[:6]],
                        {"do_rescale": False, "do_normalize": False}),
        "qwen2-nested-frames": (HF2, hf_video.Qwen2VLVideoProcessor, {},
                                [[torch.from_numpy(f) for f in frames[:4]], frames[4:8]], {}),
        # one (H, W, 3) frame: transformers batches it as a video of one frame
        "qwen2-one-frame": (HF2, hf_video.Qwen2VLVideoProcessor, {}, frames[0], {}),
        # frames 3 pixels high: transformers' channel inference reads them channels first
        "qwen2-three-rows": (HF2, hf_video.Qwen2VLVideoProcessor, {},
                             np.ascontiguousarray(frames[:4, :3]), {}),
        "qwen3-nested": (HF3, hf_video.Qwen3VLVideoProcessor, {}, [[frames]],
                         {"do_sample_frames": False, "do_rescale": False, "do_normalize": False,
                          "video_metadata": [[{**meta, "height": None, "width": None}]]}),
    }
    result = {}
    for name, (ref_cls, our_cls, kwargs, video, call) in cases.items():
        ref = ref_cls(**kwargs)(video, return_metadata=True, **call)
        our = our_cls(**kwargs)
        ours = our(video, return_metadata=True, **call)
        result[name] = {
            "dtype": ref["pixel_values_videos"].dtype == ours["pixel_values_videos"].dtype,
            "pixels": bool(torch.equal(ref["pixel_values_videos"], ours["pixel_values_videos"])),
            "grid": bool(torch.equal(ref["video_grid_thw"], ours["video_grid_thw"])),
            "indices": indices(ref) == indices(ours),
            "fps": [m.fps for m in ref["video_metadata"]] == [m.fps for m in
                                                              ours["video_metadata"]],
            "torch": isinstance(ours["pixel_values_videos"], torch.Tensor),
            "subclass": isinstance(our, ref_cls),
            "computed_by_smg_fast": id(our) in hf_video._processors,
        }
        again = our(video, return_metadata=True, **call)  # the instance vLLM keeps, called again
        result[name]["again"] = bool(torch.equal(ref["pixel_values_videos"],
                                                 again["pixel_values_videos"]))
        result[name]["to_dict"] = our.to_dict() == copy.deepcopy(our).to_dict()
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("smg_fast").addHandler(handler)
    logging.getLogger("smg_fast").setLevel(logging.INFO)
    handed = hf_video.Qwen2VLVideoProcessor()  # do_rescale alone off: transformers computes it
    ours = handed(frames[:4], do_rescale=False)
    result["handed-over"] = {
        "pixels": bool(torch.equal(HF2()(frames[:4], do_rescale=False)["pixel_values_videos"],
                                   ours["pixel_values_videos"])),
        "not_computed_by_smg_fast": id(handed) not in hf_video._processors,
        "logged": lines == ["smg-fast: Qwen2VLVideoProcessor hands calls to transformers' "
                            "Qwen2VLVideoProcessor when: only one of do_rescale, do_normalize "
                            "is False"]}
    with open(clip, "rb") as fh:  # bytes: smg-fast decodes them (transformers takes no bytes)
        ours = hf_video.Qwen3VLVideoProcessor()(fh.read())
    result["bytes"] = {"pixels": bool(torch.equal(
        ours["pixel_values_videos"],
        HF3()(frames, video_metadata=meta)["pixel_values_videos"]))}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
