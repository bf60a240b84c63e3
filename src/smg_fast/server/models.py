"""The processors a server loaded, their min/max-pixel variants and their video processors."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from ..errors import UnsupportedCallError
from ..imaging.media import DEFAULT_IMAGE_FORMATS
from ..processors import Processor, load_processor
from ..processors.config import BACKENDS
from ..processors.loader import load_video_processor, make_processor
from ..processors.registry import check_config, names
from ..processors.video_config import RULE_OF_FAMILY
from .request_error import RequestError

_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_MAX_VARIANTS = 64


def split_backend(source: str) -> tuple[str, str | None]:
    """FAMILY_OR_DIR[:BACKEND] -> (FAMILY_OR_DIR, BACKEND or None).

    A folder keeps a colon in its name unless what follows the last one is a backend's name."""
    head, sep, tail = source.rpartition(":")
    if sep and tail in BACKENDS:
        return head, tail
    if sep and head in names():
        raise ValueError(f"unknown backend {tail!r} in {source!r}: use one of {BACKENDS}")
    return source, None


@dataclass
class LoadedModel:
    name: str
    source: str  # the family or folder, without the :BACKEND suffix
    proc: Processor
    fingerprint: str
    video: Any = None  # its VideoProcessor, made when the first video item asks for it

    @property
    def backend(self) -> str:
        return self.proc.config.backend

    @property
    def takes_video(self) -> bool:
        return self.proc.config.family in RULE_OF_FAMILY


class ModelSet:
    """The processors loaded at start, plus a small LRU of per-request min/max-pixel variants."""

    def __init__(self, specs: list[tuple[str, str]], max_image_pixels: int,
                 image_formats: Sequence[str] = DEFAULT_IMAGE_FORMATS,
                 video_limits: Any = None, video_threads: int | None = None,
                 video_decoder: str = "pyav", video_skip: bool = True) -> None:
        limit = max_image_pixels or None
        self.video_limits = video_limits  # VideoLimits for video items (None: the defaults)
        self.video_threads = video_threads
        self.video_decoder = video_decoder  # whose frames unless an item names a decoder
        self.video_skip = video_skip  # the skip decode (--video-decode skip)
        self.models: dict[str, LoadedModel] = {}
        for name, spec in specs:
            source, backend = split_backend(spec)
            try:
                proc = load_processor(source, backend=backend, max_image_pixels=limit,
                                      image_formats=tuple(image_formats))
            except (ValueError, TypeError, OSError) as exc:
                raise ValueError(f"--model {name}={spec}: {exc}") from exc
            call_only = getattr(proc, "call_only", None)  # computed by the library call alone
            if call_only:
                raise ValueError(f"--model {name}={spec}: {call_only}")
            try:  # what the folder's settings compute at all: refused now, not on every request
                proc.pipeline("float32")
            except (UnsupportedCallError, ValueError, TypeError) as exc:
                raise ValueError(f"--model {name}={spec}: {exc}") from exc
            self.models[name] = LoadedModel(name, source, proc, proc.config.fingerprint)
        self.default = specs[0][0]
        self._variants: OrderedDict[tuple[str, int, int], tuple[Processor, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> LoadedModel:
        model = self.models.get(name or self.default)
        if model is None:
            raise RequestError(_INVALID, f"unknown model {name!r}; this server serves "
                                         f"{sorted(self.models)}")
        return model

    def video(self, model: LoadedModel) -> Any:
        """The model's VideoProcessor (made once); RequestError if the model takes no videos."""
        if model.video is not None:
            return model.video
        if not model.takes_video:
            raise RequestError(_INVALID, f"model {model.name!r} ({model.proc.config.family}) "
                                         f"takes no videos (video families: "
                                         f"{sorted(RULE_OF_FAMILY)})")
        with self._lock:
            if model.video is None:
                try:
                    model.video = load_video_processor(model.source, limits=self.video_limits,
                                                       threads=self.video_threads,
                                                       decoder=self.video_decoder,
                                                       skip=self.video_skip)
                except (ValueError, TypeError, OSError) as exc:
                    raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                                       f"model {model.name!r}: its video settings cannot be "
                                       f"served: {exc}") from None
            return model.video

    def variant(self, model: LoadedModel, min_pixels: int | None,
                max_pixels: int | None) -> tuple[Processor, str]:
        """(processor, fingerprint) for the model with its smart_resize range overridden."""
        if min_pixels is None and max_pixels is None:
            return model.proc, model.fingerprint
        cfg = model.proc.config
        if not model.proc.per_request_pixels:
            raise RequestError(_INVALID, f"min_pixels/max_pixels apply to Qwen models only, "
                                         f"{model.name!r} is {cfg.family}")
        lo = cfg.min_pixels if min_pixels is None else min_pixels
        hi = cfg.max_pixels if max_pixels is None else max_pixels
        # A request may narrow the model's range, never widen it: the configured max_pixels is
        # what bounds one image's output (and min = max = 2**63 must not reach the arithmetic).
        if not cfg.min_pixels <= lo <= hi <= cfg.max_pixels:
            raise RequestError(_INVALID, f"min_pixels={lo}, max_pixels={hi}: need "
                                         f"{cfg.min_pixels} <= min_pixels <= max_pixels <= "
                                         f"{cfg.max_pixels} (model {model.name!r})")
        key = (model.name, lo, hi)
        with self._lock:
            hit = self._variants.get(key)
            if hit is not None:
                self._variants.move_to_end(key)
                return hit
        try:
            new_cfg = dataclasses.replace(cfg, min_pixels=lo, max_pixels=hi)
            check_config(new_cfg)
        except ValueError as exc:
            raise RequestError(_INVALID, f"min_pixels={lo}, max_pixels={hi}: {exc}") from None
        proc = make_processor(new_cfg)
        out = (proc, new_cfg.fingerprint)
        with self._lock:
            self._variants[key] = out
            while len(self._variants) > _MAX_VARIANTS:
                self._variants.popitem(last=False)
        return out
