"""Decoding a batch's images side by side, on the native core's threads.

libjpeg-turbo, zlib-ng, zlib, the native PNG unfilter and Pillow all release the GIL while they
decode, so the images of one call decode on as many threads as the native core uses
(``smg_fast.set_num_threads``) instead of one after another."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from .. import _native
from ..imaging import decoders
from ..imaging.media import ImageHeader, Pixels

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _forget_after_fork() -> None:
    # A forked child has none of the pool's threads (and maybe a held lock): work submitted to
    # the inherited pool would never run.
    global _lock, _pool, _pool_size
    _lock, _pool, _pool_size = threading.Lock(), None, 0


os.register_at_fork(after_in_child=_forget_after_fork)


def _submit(workers: int, headers: Sequence[ImageHeader]) -> list[Future[Pixels]]:
    # One pool per process, shared by every caller (a server's concurrent requests): the decode
    # threads in use never exceed the thread count, however many requests arrive at once. A new
    # thread count replaces the pool; submitting under the lock keeps another caller from
    # submitting to the one being shut down (its queued work still runs).
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != workers:
            if _pool is not None:
                _pool.shutdown(wait=False)
            # Its threads decode whole images side by side: no JPEG row bands on top.
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="smg-fast-decode",
                                       initializer=decoders.decode_whole_in_this_thread)
            _pool_size = workers
        return [_pool.submit(h.decode) for h in headers]


def decode_iter(headers: Sequence[ImageHeader]) -> Iterator[Pixels]:
    """Every header decoded, yielded in order as soon as it is ready.

    The later ones go on decoding on the pool meanwhile (so a caller computes image i while
    images i+1... decode). The first failing image (in order) raises its error, as a serial loop
    would; then, or when the caller stops early (close the generator), decodes not yet started
    are cancelled and running ones waited for, so none outlives the call."""
    threads = int(_native.num_threads())
    if threads <= 1 or len(headers) <= 1:
        for h in headers:
            yield h.decode()
        return
    # The pool's size follows the thread count only (not the batch): its threads, and the
    # pooled decode buffers each keeps warm, live across calls.
    futures = _submit(threads, headers)
    try:
        for f in futures:
            yield f.result()
    finally:
        for f in futures:
            f.cancel()
        wait(futures)


def decode_all(headers: Sequence[ImageHeader]) -> list[Pixels]:
    """Every header decoded, in order (decode_iter's rules)."""
    return list(decode_iter(headers))
