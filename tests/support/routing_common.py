"""Helpers of the fleet tests (test_routing_*.py, test_router_process.py).

Server arguments, real-photo crops, noise and flat PNGs, and where an image goes first."""

from __future__ import annotations

import io
import signal

import numpy as np
from PIL import Image

from smg_fast.client import _media_item
from smg_fast.routing.placement import item_key, order
from smg_fast.testing.servers import ServerProcess

SERVER_ARGS = ["--workers", "2", "--drain-timeout-s", "5", "--pixel-cache-mb", "64"]


def crops(real_images, count: int) -> list[bytes]:
    """Distinct small real-photo JPEGs (different crops and sizes: different grids)."""
    out = []
    names = ["chelsea", "coffee", "rocket", "astronaut"]
    for i in range(count):
        im = real_images.rgb(names[i % len(names)])
        w, h = 56 + 14 * (i % 7), 42 + 14 * (i % 5)
        x, y = 7 * i % (im.width - w), 5 * i % (im.height - h)
        buf = io.BytesIO()
        im.crop((x, y, x + w, y + h)).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def png(w: int, h: int, seed: int) -> bytes:
    """A w x h noise PNG (distinct per seed; big ones are slow to serve)."""
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "PNG",
                                                                          compress_level=1)
    return buf.getvalue()


def flat_png(w: int, h: int) -> bytes:
    """A w x h single-colour PNG: a few KiB that become w x h x 12 bytes of float32 patches."""
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (90, 30, 200)).save(buf, "PNG")
    return buf.getvalue()


def first_choice(image: bytes, targets: list[str]) -> str:
    """The member an image of the default model (float32) goes to when all are idle."""
    return order(item_key(_media_item(image), "qwen2_vl", "float32", None, None), targets)[0]


def preferring(target: str, targets: list[str], count: int, start: int = 0,
               size: tuple[int, int] = (40, 30)) -> list[bytes]:
    """count distinct noise PNGs of size whose first choice is target (seeds from start)."""
    out, seed = [], start
    while len(out) < count:
        im = png(*size, seed)
        seed += 1
        if first_choice(im, targets) == target:
            out.append(im)
    return out


def check(out, picks, refs) -> None:
    """out's items are refs[picks], exact and in order."""
    assert len(out.items) == len(picks)
    for it, k in zip(out.items, picks, strict=True):
        assert np.array_equal(it.pixel_values, refs[k]), k


def start_servers(n: int, args: list[str]) -> list:
    """n server processes started side by side, each SERVING (all stopped if one fails)."""
    servers = [ServerProcess(args) for _ in range(n)]
    try:
        for s in servers:
            s.wait()
    except BaseException:
        stop(servers)
        raise
    return servers


def stop(procs) -> None:
    """Kills server/router processes (resuming a stopped one first) and closes their pipes."""
    for p in procs:
        if p is None:
            continue
        if p.proc.poll() is None:
            p.proc.send_signal(signal.SIGCONT)
        p.kill()
        if p.proc.stderr is not None:
            p.proc.stderr.close()
