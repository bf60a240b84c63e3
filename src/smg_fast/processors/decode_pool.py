"""Decoding a batch's images side by side: libjpeg-turbo, libspng and Pillow all release the GIL
while they decode, so the images of one call decode on as many threads as the native core uses
(``smg_fast.set_num_threads``) instead of one after another."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from .. import _native
from ..media import ImageHeader, Pixels

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _executor(workers: int) -> ThreadPoolExecutor:
    # One pool per process, shared by every caller (a server's concurrent requests): the decode
    # threads in use never exceed the thread count, however many requests arrive at once.
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != workers:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="smg-fast-decode")
            _pool_size = workers
        return _pool


def decode_all(headers: Sequence[ImageHeader]) -> list[Pixels]:
    """Every header decoded, in order. All decodes finish before this returns or raises; the
    error raised is the one of the first failing image, as a serial loop would raise it."""
    workers = min(len(headers), int(_native.num_threads()))
    if workers <= 1:
        return [h.decode() for h in headers]
    futures: list[Future[Pixels]] = [_executor(workers).submit(h.decode) for h in headers]
    arrays: list[Pixels] = []
    error: BaseException | None = None
    for f in futures:
        try:
            arrays.append(f.result())
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the others finish
            error = error or exc
    if error is not None:
        raise error
    return arrays
