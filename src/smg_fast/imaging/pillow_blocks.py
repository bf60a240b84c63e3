"""Pillow's single-block allocator: large images kept in one buffer, which smg-fast reads in place.

Pillow stores an image over its block size (16 MiB: an RGB image of more than about 4.2 MP, kept
4 bytes a pixel) in several blocks, which no single view covers, so smg-fast copies such an
image's pixels once before resizing them (a 12 MP photo: about a fifth of a tiling family's whole
call). Pillow's single-block allocator (``Image.core.set_use_block_allocator``, Pillow 11.2 on,
the setting Pillow's Arrow documentation names) puts every image allocated afterwards in one
buffer, which smg-fast reads where it lies: the pixels are the same, only their layout in memory
changes. The setting is process-wide, and one Pillow limit comes with it: an image of 2 GiB of
pixels or more (over 536 million RGB pixels, past Pillow's decompression-bomb limit unless that is
lifted) cannot be allocated in one block and fails with MemoryError instead of being split.

Costs that come with it: every new Pillow image is then zero-filled memory (calloc), and its
freed memory bypasses Pillow's cache of freed blocks (``PILLOW_BLOCKS_MAX``, off by default), whose
warm pages, where that cache is on, beat a fresh single block; transformers' own classes (the
families an engine leaves to them) may run a little slower on a single block (seen for InternVL's
torchvision class at 4000x3000). So
only the engine plug-ins turn it on (:func:`enable_from_env`, saying so in their INFO line),
unless ``SMG_FAST_PILLOW_ONE_BLOCK=0`` or Pillow keeps freed blocks; ``python -m smg_fast.server``
keeps freed blocks and turns it off. A library user calls :func:`use_single_block_images`."""

from __future__ import annotations

from PIL import Image

from .._env import enabled

ENV = "SMG_FAST_PILLOW_ONE_BLOCK"


def single_block_images() -> bool:
    """Whether Pillow allocates new images in one block (False where it has no such setting)."""
    getter = getattr(Image.core, "get_use_block_allocator", None)
    return bool(getter()) if getter is not None else False


def use_single_block_images(enable: bool = True) -> bool:
    """Makes Pillow allocate every new image in one block (or, enable=False, in its default blocks).

    Returns whether new images are now single blocks: False on a Pillow without the setting
    (before 11.2), where nothing changes. Images already allocated keep their blocks."""
    if not isinstance(enable, bool):
        raise TypeError(f"enable must be a bool, got {type(enable).__name__}")
    setter = getattr(Image.core, "set_use_block_allocator", None)
    if setter is None:
        return False
    setter(1 if enable else 0)
    return single_block_images()


def enable_from_env() -> bool:
    """Turns the single-block allocator on where Pillow keeps no freed blocks, unless told not to.

    Told not to: SMG_FAST_PILLOW_ONE_BLOCK is 0 / false / off / no; freed blocks: PILLOW_BLOCKS_MAX.
    What the engine plug-ins call; otherwise Pillow's setting is left as it is. Returns whether new
    images are single blocks."""
    blocks_max = getattr(Image.core, "get_blocks_max", None)
    if not enabled(ENV) or (blocks_max is not None and blocks_max() > 0):
        return single_block_images()
    return use_single_block_images(True)
