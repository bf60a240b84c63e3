"""Pillow's single-block allocator, as smg_fast.use_single_block_images and the plug-ins set it.

The pixels a processor reads from a large image held in one block are checked against
transformers in the parity suites (test_image_larger_than_pillow_block and its peers); here, the
setting itself: on, off, the environment variable, a Pillow without it, and Pillow's own limit
that comes with it."""

from __future__ import annotations

import pytest
from PIL import Image

import smg_fast
from smg_fast.imaging import pillow_blocks

BIG = (2600, 1800)  # 18.7 MB as Pillow keeps it: over its 16 MiB block size


@pytest.fixture(autouse=True)
def no_block_cache():
    """Pillow's cache of freed blocks off, as in a fresh process (an in-process server sets it)."""
    before = Image.core.get_blocks_max()
    Image.core.set_blocks_max(0)
    yield
    Image.core.set_blocks_max(before)


def test_on_and_off(pillow_allocator):
    pillow_allocator(False)
    assert not Image.new("RGB", BIG).im.isblock()
    assert smg_fast.use_single_block_images() is True
    kept = Image.new("RGB", BIG)
    assert kept.im.isblock() and Image.core.get_use_block_allocator() == 1
    assert smg_fast.use_single_block_images(False) is False
    assert not Image.new("RGB", BIG).im.isblock()
    assert kept.im.isblock()  # an image keeps the storage it was given


@pytest.mark.parametrize("value", [1, "yes", None])
def test_enable_takes_a_bool(value, pillow_allocator):
    pillow_allocator(False)
    with pytest.raises(TypeError, match="enable must be a bool"):
        smg_fast.use_single_block_images(value)
    assert Image.core.get_use_block_allocator() == 0


@pytest.mark.parametrize(("env", "before", "after"),
                         [(None, False, True), ("1", False, True), ("0", False, False),
                          ("off", True, True), (" False ", False, False)])
def test_the_env_var_decides_and_off_leaves_pillow_as_it_is(env, before, after, monkeypatch,
                                                             pillow_allocator):
    pillow_allocator(before)
    if env is None:
        monkeypatch.delenv(pillow_blocks.ENV, raising=False)
    else:
        monkeypatch.setenv(pillow_blocks.ENV, env)
    assert pillow_blocks.enable_from_env() is after
    assert Image.new("RGB", BIG).im.isblock() is after


def test_a_pillow_without_the_setting_changes_nothing(monkeypatch, pillow_allocator):
    pillow_allocator(False)
    monkeypatch.delattr(Image.core, "set_use_block_allocator")
    monkeypatch.delattr(Image.core, "get_use_block_allocator")
    assert smg_fast.use_single_block_images() is False
    assert pillow_blocks.enable_from_env() is False
    assert not pillow_blocks.single_block_images()


def test_left_off_where_pillow_keeps_freed_blocks(monkeypatch, pillow_allocator):
    """The server keeps them (PILLOW_BLOCKS_MAX): reusing their pages beats a fresh single block."""
    pillow_allocator(False)
    monkeypatch.delenv(pillow_blocks.ENV, raising=False)
    Image.core.set_blocks_max(4)
    assert pillow_blocks.enable_from_env() is False
    assert not Image.new("RGB", BIG).im.isblock()
    Image.core.set_blocks_max(0)
    assert pillow_blocks.enable_from_env() is True


def test_the_server_turns_it_off_where_it_keeps_freed_blocks(monkeypatch, pillow_allocator):
    """An in-process server after a plug-in turned it on: its block cache wins."""
    from smg_fast.server.app import _keep_pillow_blocks

    pillow_allocator(True)
    monkeypatch.delenv("PILLOW_BLOCKS_MAX", raising=False)
    _keep_pillow_blocks(2)
    assert Image.core.get_blocks_max() == 6
    assert not Image.new("RGB", BIG).im.isblock()
    pillow_allocator(True)  # blocks a user keeps (more than the server would) count the same
    Image.core.set_blocks_max(64)
    _keep_pillow_blocks(2)
    assert Image.core.get_blocks_max() == 64 and not Image.new("RGB", BIG).im.isblock()


def test_an_image_of_2_gib_or_more_is_refused_in_one_block(pillow_allocator):
    """Pillow's limit that comes with the setting (documented): MemoryError, nothing allocated."""
    pillow_allocator(True)
    assert Image.core.get_use_block_allocator() == 1  # else Image.new would fill 2 GiB
    with pytest.raises(MemoryError):
        Image.new("RGBA", (16384, 32768))  # 2 GiB of pixels
