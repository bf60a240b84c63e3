"""Not-yet-decoded JPEG images that remember their bytes, for engines that decode before processing.

An engine such as vLLM decodes a request's image bytes with Pillow, applies the EXIF orientation
(``ImageOps.exif_transpose``: ``load()`` then ``copy()``, twice in vLLM's Qwen2-VL path) and
converts to RGB before its image processor sees the image. For a baseline RGB JPEG without a
rotating orientation, those steps change nothing but the time they take. ``open_lazy_jpeg`` gives
such an image as a ``LazyJpegImageFile``: Pillow's own JPEG image whose pixels are decoded on the
first access to them (``im``, through every Pillow method that reads or writes pixels) rather than
by ``load()``, and whose ``copy()`` while undecoded is another lazy image of the same bytes.
``encoded_source`` hands the bytes to smg-fast's processor, which decodes them natively (overlapped
with the resize) into the very pixels Pillow would give. Anyone else who reads the image's pixels
makes Pillow decode it, as usual: the same pixels either way.
"""

from __future__ import annotations

import copyreg
import io
import threading
from typing import Any

from PIL import Image, JpegImagePlugin

# EXIF tag 0x0112: orientation; 1 (or none) means the pixels are stored upright.
_ORIENTATION = 0x0112
# The laziness rests on Pillow keeping an image's core in ``_im`` behind an ``im`` property (Pillow
# 10.1 and later); with another Pillow, images are not made lazy.
_SUPPORTED = isinstance(vars(Image.Image).get("im"), property)


class _DeferredAccess:
    """What ``load()`` returns while undecoded: decodes on first use, then acts as Pillow's."""

    def __init__(self, image: LazyJpegImageFile) -> None:
        self._image = image
        self._access: Any = None

    def _real(self) -> Any:
        if self._access is None:  # Pillow's access to the core the decode made, as load() gives
            self._access = self._image.decode_now()
        return self._access

    def __getitem__(self, xy: Any) -> Any:
        return self._real()[xy]

    def __setitem__(self, xy: Any, value: Any) -> None:
        self._real()[xy] = value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)


class LazyJpegImageFile(JpegImagePlugin.JpegImageFile):
    """A JPEG image whose decode waits for its first pixel access; it remembers its bytes."""

    _smg_source: bytes = b""
    _smg_size: tuple[int, int] = (0, 0)
    _smg_lock: Any = None  # one per image (open_lazy_jpeg): its readers wait for one decode
    _smg_decoder: int | None = None  # the thread decoding it now

    @property
    def undecoded(self) -> bool:
        """Whether Pillow has not decoded the pixels yet."""
        return self._im is None and bool(self.tile)

    def decode_now(self) -> Any:
        """Decodes the pixels with Pillow (once); returns Pillow's pixel access object.

        A thread that asks while another decodes waits for that decode, as it would have found
        the pixels decoded had Pillow decoded them when the image was opened."""
        with self._smg_lock:
            self._smg_decoder = threading.get_ident()
            try:
                return JpegImagePlugin.JpegImageFile.load(self)
            finally:
                self._smg_decoder = None

    def _waits(self) -> bool:
        """Whether this thread must decode, or wait for another thread's decode, before reading."""
        decoder = self._smg_decoder
        if decoder == threading.get_ident():
            return False  # Pillow's decode, inside decode_now
        return decoder is not None or self.undecoded

    def load(self) -> Any:
        """Pillow's load(), except that the decode waits for the first pixel access."""
        if self._smg_decoder != threading.get_ident():
            if self.undecoded:
                return _DeferredAccess(self)
            if self._smg_decoder is not None:  # another thread is decoding: wait for it
                return self.decode_now()
        return JpegImagePlugin.JpegImageFile.load(self)

    @property  # type: ignore[override]
    def im(self) -> Any:
        """Pillow's image core, decoded first if it was not."""
        if self._waits():
            self.decode_now()
        return Image.Image.im.fget(self)  # type: ignore[attr-defined]

    @im.setter
    def im(self, core: Any) -> None:
        Image.Image.im.fset(self, core)  # type: ignore[attr-defined]

    def copy(self) -> Image.Image:
        """Another lazy image of the same bytes while undecoded, else Pillow's copy."""
        if encoded_source(self) is not None:  # not drafted to another size or mode
            twin = open_lazy_jpeg(self._smg_source)
            if twin is not None:
                twin.info = self._copy_info()
                return twin
        return super().copy()

    __copy__ = copy

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled as the plain Pillow image its decode gives (an engine's decoded copy).

        A process without smg-fast loads it."""
        plain = Image.Image.copy(self)
        return copyreg._reconstructor, (Image.Image, object, None), plain.__getstate__()


def open_lazy_jpeg(data: bytes) -> LazyJpegImageFile | None:
    """data as an undecoded Pillow image that remembers its bytes, or None when it cannot be one.

    None unless data is a JPEG Pillow opens as plain ``JPEG`` (not MPO or another container), in
    RGB, with no EXIF orientation other than 1: for those, decoding, transposing and converting to
    RGB give the decoded pixels unchanged. Raises what Pillow raises for bytes it cannot open."""
    if not _SUPPORTED or not data.startswith(b"\xff\xd8"):
        return None
    image = Image.open(io.BytesIO(data))
    if (type(image) is not JpegImagePlugin.JpegImageFile or image.mode != "RGB"
            or "transparency" in image.info
            or image.getexif().get(_ORIENTATION, 1) != 1):
        image.close()
        return None
    image.__class__ = LazyJpegImageFile
    image._smg_source = bytes(data)
    image._smg_lock = threading.Lock()
    image._smg_size = image.size
    return image


def encoded_source(image: Any) -> bytes | None:
    """The bytes of an image open_lazy_jpeg made, while Pillow has not decoded or changed it.

    None for any other object, and once the image is decoded (its pixels may then have been
    edited in place) or its size or mode changed (``draft``)."""
    if not isinstance(image, LazyJpegImageFile) or not image.undecoded:
        return None
    if image.size != image._smg_size or image.mode != "RGB":
        return None
    return image._smg_source


__all__ = ["LazyJpegImageFile", "encoded_source", "open_lazy_jpeg"]
