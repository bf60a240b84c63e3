"""A decoded frame's YUV to RGB conversion, as each reference decoder converts it.

Every reference decoder runs FFmpeg's decoders, so the decoded YUV frame is the same; they
differ in how it becomes RGB, and each is reproduced here through PyAV's FFmpeg:

- ``pyav`` (transformers' ``load_video`` default): ``VideoFrame.to_ndarray(format="rgb24")``,
  swscale with bilinear flags, the frame's colour matrix and range.
- ``torchcodec`` (transformers' video processors given a path or URL, SGLang): FFmpeg's
  ``scale`` filter (bicubic) then ``format=rgb24`` in a filter graph, the frame's colour matrix
  and range as the filter reads them from the frame.
- ``opencv`` (vLLM's default loader): swscale to BGR24 with bicubic flags, then the channels
  swapped (``cv2.cvtColor(..., COLOR_BGR2RGB)`` is a pure swap).

torchcodec and OpenCV then turn a frame with display rotation upright (a quarter turn is an
exact permutation of the converted pixels); transformers' PyAV loader does not.

Where the source is 8-bit 4:2:0 the three agree; 10-bit and 4:2:2 / 4:4:4 sources are where
they part (chroma upsampling and the dither of the bit-depth reduction follow the flags and the
destination layout). Tests compare each with the real library on clips made with PyAV.

8-bit planar YUV frames (``poolable``: ``POOLED_FORMATS`` whose chroma rows pair up) go through
one filter graph per video and frame properties with the decoder's flags: the graph's scale
filter runs the same swscale conversion as PyAV's reformat (the frame's colour matrix, range
and interlacing; OpenCV's BGR conversion then swap gives the same pixels there), and its
output buffers come from the graph's pool, so a frame the caller has dropped lends its memory to
the next one, not a fresh 6 MB (1080p) allocation that the kernel must zero. Other frames keep
the library's own call: on 10-bit sources the scale filter's result is not PyAV's, and where
the chroma location matters the filter does not know it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidVideoError, UnsupportedCallError, UnsupportedVideoError

DECODERS = ("pyav", "torchcodec", "opencv")
POOLED_FORMATS = frozenset({"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p"})
# The scale filter's options per decoder: PyAV's reformat (and OpenCV's conversion) convert an
# interlaced frame's fields apart (interl=-1: as the frame says), torchcodec's filter as one
# picture (the filter's default).
SCALE_OPTIONS = {"pyav": "flags=bilinear:interl=-1", "opencv": "flags=bicubic:interl=-1",
                 "torchcodec": "flags=bicubic"}
UNSPECIFIED = 2  # AVCOL_TRC_UNSPECIFIED and AVCOL_PRI_UNSPECIFIED


def check_decoder(decoder: str) -> str:
    """The decoder name, or UnsupportedCallError (a ValueError) naming the known ones."""
    if not isinstance(decoder, str) or decoder not in DECODERS:
        raise UnsupportedCallError(f"unknown video decoder {decoder!r} (one of "
                                   f"{', '.join(DECODERS)})")
    return decoder


class FrameConverter:
    """Converts one video's decoded frames to (H, W, 3) uint8 RGB as ``decoder`` does."""

    def __init__(self, decoder: str, index: int = 0) -> None:
        self.decoder = check_decoder(decoder)
        self.index = index  # the video, named in errors
        self._graph: Any = None
        self._graph_key: tuple[Any, ...] | None = None

    def __call__(self, frame: Any) -> np.ndarray:
        import av

        try:
            if self.decoder == "torchcodec":
                rgb = self._filtered(frame, (frame.width, frame.height, frame.format.name))
            elif poolable(frame):
                rgb = self._reformatted(frame)
            elif self.decoder == "pyav":
                rgb = frame.to_ndarray(format="rgb24")
            else:
                rgb = frame.to_ndarray(format="bgr24", interpolation="BICUBIC")[..., ::-1]
        except av.FFmpegError as exc:  # a frame FFmpeg cannot convert (its format, its size)
            raise InvalidVideoError(self.index, f"frame conversion failed ({exc})") from None
        if self.decoder == "pyav":  # transformers' PyAV loader ignores rotation
            return rgb
        return self._upright(frame, rgb)

    def _upright(self, frame: Any, rgb: np.ndarray) -> np.ndarray:
        """The converted frame turned by its display rotation, as torchcodec and OpenCV do."""
        angle = int(round(getattr(frame, "rotation", 0) or 0))
        if angle % 90:
            raise UnsupportedVideoError(self.index, f"display rotation of {angle} degrees (only "
                                                    "multiples of 90 are reproduced)")
        turns = (angle // 90) % 4
        if not turns and rgb.strides[1:] == (3, 1):  # packed pixels (rows may be padded)
            return rgb
        return np.ascontiguousarray(np.rot90(rgb, turns))

    def _filtered(self, frame: Any, key: tuple[Any, ...]) -> np.ndarray:
        """The frame through a scale filter to rgb24; its buffers come from the graph's pool.

        One graph per key: the frame properties the conversion follows."""
        if self._graph is None or key != self._graph_key:
            self._graph = _scale_graph(frame, SCALE_OPTIONS[self.decoder])
            self._graph_key = key
        self._graph.push(frame)
        return self._graph.pull().to_ndarray()

    def _reformatted(self, frame: Any) -> np.ndarray:
        """PyAV's reformat of a poolable frame, through the pooled graph.

        As PyAV does, the frame's transfer and primaries tags are left out of the conversion
        (swscale would refuse reserved values) and put back after."""
        key = (frame.width, frame.height, frame.format.name, frame.color_range,
               frame.colorspace, frame.interlaced_frame)
        trc, primaries = frame.color_trc, frame.color_primaries
        frame.color_trc = frame.color_primaries = UNSPECIFIED
        try:
            return self._filtered(frame, key)
        finally:
            frame.color_trc, frame.color_primaries = trc, primaries


def poolable(frame: Any) -> bool:
    """Whether the pooled graph converts frame exactly as PyAV's reformat does.

    An 8-bit planar YUV frame of even height (a multiple of 4 when interlaced) or 4:4:4: at an
    odd height or odd field height swscale leaves its unscaled conversion for one that follows
    the frame's chroma location, which the filter is not told (measured on 4:2:0 and 4:2:2)."""
    name = frame.format.name
    if name not in POOLED_FORMATS:
        return False
    if name.endswith("444p"):
        return True
    return frame.height % (4 if frame.interlaced_frame else 2) == 0


def _scale_graph(frame: Any, options: str) -> Any:
    """buffer -> scale (same size, options) -> format=rgb24 -> buffersink, for frame's shape."""
    from fractions import Fraction

    import av

    graph = av.filter.Graph()
    src = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format.name,
                           time_base=frame.time_base or Fraction(1, 1))
    scale = graph.add("scale", f"w={frame.width}:h={frame.height}:{options}")
    fmt = graph.add("format", "rgb24")
    sink = graph.add("buffersink")
    src.link_to(scale)
    scale.link_to(fmt)
    fmt.link_to(sink)
    graph.configure()
    return graph


__all__ = ["DECODERS", "FrameConverter", "check_decoder", "poolable"]
