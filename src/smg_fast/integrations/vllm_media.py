"""vLLM media connector that leaves a request's JPEG images undecoded for smg-fast's processor.

vLLM's API server decodes every image of a request with Pillow (then applies its EXIF orientation,
copying it, and converts it to RGB) before its multimodal processor runs; for a 2048x2048 JPEG that
is about as much CPU as smg-fast's whole processor. vLLM lets a plug-in register a media connector
(``MEDIA_CONNECTOR_REGISTRY``) and pick it with ``VLLM_MEDIA_CONNECTOR``: this one, ``smg_fast``
(also put in place of vLLM's default ``http`` while ``VLLM_MEDIA_CONNECTOR`` is unset, in each
process that loads the plug-in), is vLLM's own ``http`` connector except for images that are
baseline RGB JPEGs without a rotating EXIF orientation. Those it returns as Pillow opened them,
undecoded, remembering their bytes (``smg_fast.imaging.lazy_jpeg``): smg-fast's processor decodes
the bytes natively, overlapped with the resize, into the pixels Pillow would give; any other
reader of the image makes Pillow decode it as vLLM would have. Every check vLLM makes on a loaded
image stays (its pixel limit ``VLLM_MAX_IMAGE_PIXELS``, the request's decoded-size budget), the
hash vLLM's cache takes (the request's bytes) is the same, and every other image, video or audio
goes through vLLM's code.

One difference: bytes whose header opens but whose data is corrupt fail when the processor decodes
them (an error from the processor) instead of when vLLM loads them (vLLM's "Failed to load image").
"""

from __future__ import annotations

import logging
from typing import Any

from ..imaging.lazy_jpeg import open_lazy_jpeg

NAME = "smg_fast"
DEFAULT = "http"  # vLLM's default connector (VLLM_MEDIA_CONNECTOR unset)
ENV = "SMG_FAST_VLLM_DECODE"  # 0 turns the connector off (vLLM's own "http" decodes)


def _connector_class() -> type:
    """The connector class, made from vLLM's own classes (imports vLLM)."""
    import vllm.envs as envs
    from PIL import UnidentifiedImageError
    from vllm.multimodal.media.base import MediaWithBytes
    from vllm.multimodal.media.connector import MediaConnector
    from vllm.multimodal.media.image import ImageMediaIO

    class LazyJpegImageMediaIO(ImageMediaIO):
        """vLLM's image loader, except that eligible JPEGs stay undecoded."""

        def load_bytes(self, data: bytes) -> Any:
            if self.image_mode != "RGB":
                return super().load_bytes(data)
            try:
                image = open_lazy_jpeg(data)
            except Exception:  # not ours to judge: vLLM's loader raises its own error
                image = None
            w, h = image.size if image is not None else (0, 0)
            max_pixels = envs.VLLM_MAX_IMAGE_PIXELS
            if image is None or (max_pixels > 0 and w * h > max_pixels):
                return super().load_bytes(data)  # vLLM's loader, and its refusal word for word
            if self.decoded_budget is not None:
                self.decoded_budget.charge(w * h * 4)
            return MediaWithBytes(image, data, None)

    class SmgFastMediaConnector(MediaConnector):
        """vLLM's http/data/file connector; JPEG images are left undecoded for smg-fast."""

        def _lazy_image_io(self, image_mode: str | None) -> LazyJpegImageMediaIO:
            options = {"image_mode": image_mode} | self.media_io_kwargs.get("image", {})
            return LazyJpegImageMediaIO(**options, decoded_budget=self.decoded_budget)

        def fetch_image(self, image_url: str, *, image_mode: str | None = "RGB") -> Any:
            try:
                return self.load_from_url(image_url, self._lazy_image_io(image_mode),
                                          fetch_timeout=envs.VLLM_IMAGE_FETCH_TIMEOUT)
            except UnidentifiedImageError as exc:
                raise ValueError(str(exc)) from exc

        async def fetch_image_async(self, image_url: str, *,
                                    image_mode: str | None = "RGB") -> Any:
            try:
                return await self.load_from_url_async(
                    image_url, self._lazy_image_io(image_mode),
                    fetch_timeout=envs.VLLM_IMAGE_FETCH_TIMEOUT)
            except UnidentifiedImageError as exc:
                raise ValueError(str(exc)) from exc

    for cls in (LazyJpegImageMediaIO, SmgFastMediaConnector):
        cls.__qualname__ = cls.__name__  # made here only because they subclass vLLM's classes
    return SmgFastMediaConnector


def register(logger: logging.Logger, *, as_default: bool) -> str | None:
    """Registers the connector with vLLM; returns why not (None when registered). Never raises.

    as_default: also under vLLM's default name, ``http``, in this process only (nothing leaks to
    child processes, which register it themselves when they load the plug-in)."""
    try:
        from vllm.multimodal.media.connector import MEDIA_CONNECTOR_REGISTRY

        cls = _connector_class()
        MEDIA_CONNECTOR_REGISTRY.register(NAME)(cls)
        if as_default:
            MEDIA_CONNECTOR_REGISTRY.register(DEFAULT)(cls)
    except Exception as exc:  # another vLLM: its own connector decodes, nothing breaks
        logger.debug("smg-fast: no media connector (%s: %s)", type(exc).__name__, exc)
        return f"this vLLM has no media connector registry smg-fast knows ({type(exc).__name__})"
    return None


__all__ = ["DEFAULT", "ENV", "NAME", "register"]
