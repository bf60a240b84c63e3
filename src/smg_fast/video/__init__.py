"""Videos: containers and their limits, frame sampling, and decoding the sampled frames (PyAV)."""

from .container import VideoHeader, VideoLimits, open_video
from .convert import DECODERS
from .decode import decode_frames, iter_frames, load_video

__all__ = ["DECODERS", "VideoHeader", "VideoLimits", "decode_frames", "iter_frames",
           "load_video", "open_video"]
