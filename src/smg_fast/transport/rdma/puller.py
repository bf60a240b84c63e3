"""The puller: the encode worker's side of the RDMA lane.

A NIXL agent with a registered landing pool. ``pull`` READs a slot's whole frame into a landing
slot, checks generation, frame and size, tells the exporter (notification tag = lease key) that
the slot is free, and returns the payload as an array that *is* the landing slot: the slot goes
back to the pool when the last reference to the array (or a tensor made from it) is dropped. When
every landing slot is held, or a payload is bigger than one, a temporary buffer is registered for
that pull instead (counted as ``overflow``), so holding results never blocks later pulls.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import secrets
import socket
import threading
import time
import weakref
from typing import Any

import numpy as np

from ... import _native
from .descriptor import Descriptor, check_frame
from .errors import DescriptorError, PullError, RdmaError, StaleSlotError
from .landing import Buffer, Holder, Peer, aligned_empty, landing_pool
from .nixl import fetch_metadata, load_nixl, make_agent, register
from .notifier import Notifier
from .remote import cast_result, parse_remote

log = logging.getLogger("smg_fast.rdma")

DEFAULT_TIMEOUT_S = 10.0  # one pull, metadata refresh and retry included
DEFAULT_METADATA_TIMEOUT_S = 3.0
DEFAULT_LANDING_SLOTS = 4
DEFAULT_LANDING_SLOT_BYTES = 32 << 20
# NIXL holds the GIL while UCX copies; READs are cut into pieces so other threads (an event loop)
# run between them.
DEFAULT_CHUNK_BYTES = 16 << 20
DEFAULT_MAX_BYTES = 4 << 30  # a 4K float32 image is ~200 MB


class Puller:
    """Pulls RemoteTensorHandles from smg-fast exporters. Thread-safe."""

    def __init__(self, *, slots: int = DEFAULT_LANDING_SLOTS,
                 slot_bytes: int = DEFAULT_LANDING_SLOT_BYTES, pin_memory: bool = False,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 metadata_timeout_s: float = DEFAULT_METADATA_TIMEOUT_S,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Raises RdmaUnavailable when NIXL cannot be used.

        ``pin_memory`` allocates the landing pool as page-locked torch memory (needs torch with
        CUDA) so results copy to a GPU fast. ``max_bytes``: handles naming a larger tensor are
        refused before anything is allocated."""
        if (slots < 0 or slot_bytes < 4096 or timeout_s <= 0 or chunk_bytes < 0
                or max_bytes < 1):
            raise ValueError("need slots >= 0, slot_bytes >= 4096, timeout_s > 0, "
                             "chunk_bytes >= 0, max_bytes >= 1")
        nixl = load_nixl()
        self.name = f"smg-fast-puller-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.timeout_s = timeout_s
        self.metadata_timeout_s = metadata_timeout_s
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # every agent call (the agent is not thread-safe)
        self._peer_lock = threading.Lock()  # the two dicts below
        self._peer_locks: dict[tuple[str, int], threading.Lock] = {}  # one metadata fetch each
        self._peers: dict[tuple[str, int], Peer] = {}
        self._pool_lock = threading.Lock()
        self._returned: collections.deque[Buffer] = collections.deque()
        self._quarantine: list[Buffer] = []  # poisoned buffers, kept alive and registered
        self._close_lock = threading.Lock()
        self._closed = True  # until fully built (nothing to close)
        self.slot_bytes = (slot_bytes + 4095) // 4096 * 4096
        # Memory first: a failure here (pin_memory without CUDA) leaves no agent behind.
        self._pool, self._pool_keep = landing_pool(slots * self.slot_bytes, pin_memory)
        self._agent = make_agent(nixl, self.name)
        self._notifier = Notifier(nixl, self.name + "-notify")
        try:
            self._reg = register(self._agent, self._pool.ctypes.data, self._pool.nbytes) \
                if slots else None
        except BaseException:
            self._notifier.close(0)
            raise
        self._free = list(range(slots - 1, -1, -1))
        self.counters = {"pulls": 0, "bytes": 0, "overflow": 0, "refreshes": 0, "stale": 0,
                         "errors": 0, "timeouts": 0, "poisoned": 0, "reclaimed": 0,
                         "metadata_retries": 0}
        self._closed = False
        _LIVE.add(self)

    # ---- public ----

    def pull(self, tensor: Any, *, as_torch: bool = False, cast: Any = None,
             timeout_s: float | None = None) -> Any:
        """The tensor a TensorData (with a ``remote`` payload) or RemoteTensorHandle names.

        Returns a numpy array (bfloat16 as uint16 bits) or, with ``as_torch``, a torch tensor,
        of TensorData's shape and dtype (a flat uint8 array for a bare handle). ``cast`` (e.g.
        "float32" or a torch dtype) converts to a model dtype, into fresh memory. Raises
        StaleSlotError when the slot was reaped and reused or its exporter restarted, PullError
        when the READ fails or times out, DescriptorError for a malformed handle.
        """
        desc, shape, dtype_name, np_dtype = parse_remote(tensor)
        if self._closed:
            raise RdmaError("this Puller is closed")
        if desc.nbytes > self.max_bytes:
            raise DescriptorError(f"handle names {desc.nbytes} bytes, more than this puller's "
                                  f"max_bytes ({self.max_bytes})")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        buf = self._take(desc.frame_len)
        try:
            self._read_checked(buf, desc, deadline)
        except BaseException:
            # A refused frame (StaleSlotError) or a failed READ may have landed another slot's
            # bytes, possibly another tenant's tensor: none may stay in a buffer we reuse.
            if not buf.poisoned:  # a poisoned one is wiped when its transfer settles
                buf.array[:desc.frame_len] = 0
            buf.release()
            raise
        holder = Holder(buf, _native.FRAME_HEADER, shape, np_dtype)
        arr = np.asarray(holder)
        with self._pool_lock:
            self.counters["pulls"] += 1
            self.counters["bytes"] += desc.nbytes
        if cast is not None:
            return cast_result(arr, dtype_name, cast, as_torch)
        if as_torch:
            from ..._dtypes import to_torch

            return to_torch(arr, dtype_name)
        return arr

    async def pull_async(self, tensor: Any, **kwargs: Any) -> Any:
        """``pull`` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.pull, tensor, **kwargs)

    def stats(self) -> dict[str, int]:
        self._reclaim()
        with self._pool_lock:
            out = dict(self.counters)
            out["landing_free"] = len(self._free)
        out["peers"] = len(self._peers)
        return out

    def close(self) -> None:
        """Drops peers and deregisters the pool. Arrays still alive keep their memory."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._reclaim()
        self._notifier.close()
        with self._lock:
            for peer in self._peers.values():
                _quiet(self._agent.remove_remote_agent, peer.name)
            self._peers.clear()
            if self._reg is not None:
                _quiet(self._agent.deregister_memory, self._reg)

    def __del__(self) -> None:
        # A NIXL agent destroyed with connected peers aborts the process: close first.
        if not getattr(self, "_closed", True):
            self.close()

    def __enter__(self) -> Puller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- landing buffers ----

    def _take(self, nbytes: int) -> Buffer:
        self._reclaim()
        if nbytes <= self.slot_bytes:
            with self._pool_lock:
                if self._free:
                    slot = self._free.pop()
                    view = self._pool[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]
                    return Buffer(self._returned, view, slot)
                self.counters["overflow"] += 1
        else:
            with self._pool_lock:
                self.counters["overflow"] += 1
        arr = aligned_empty(nbytes, 4096)
        with self._lock:
            reg = register(self._agent, arr.ctypes.data, arr.nbytes)
        return Buffer(self._returned, arr, -1, reg)

    def _reclaim(self) -> None:
        """Takes back the buffers that are free again.

        Those released since the last call (see Buffer.release), and the quarantined ones whose
        timed-out transfers have since settled."""
        while True:
            try:
                buf = self._returned.popleft()
            except IndexError:
                break
            if buf.poisoned:  # a late write could still land: keep it alive and registered
                with self._pool_lock:
                    self.counters["poisoned"] += 1
                    self._quarantine.append(buf)
            else:
                self._give_back(buf)
        if self._quarantine and not self._closed:
            self._settle_quarantine()

    def _give_back(self, buf: Buffer) -> None:
        if buf.slot >= 0:
            with self._pool_lock:
                self._free.append(buf.slot)
        elif buf.reg is not None and not self._closed:
            with self._lock:
                _quiet(self._agent.deregister_memory, buf.reg)

    def _settle_quarantine(self) -> None:
        """A quarantined buffer is reusable once every transfer into it reports DONE or ERR.

        Then nothing can land in it any more, and its handles can be released."""
        with self._pool_lock:
            held, self._quarantine = self._quarantine, []
        keep = []
        for buf in held:
            with self._lock:
                states = []
                for handle in buf.handles:
                    try:
                        states.append(self._agent.check_xfer_state(handle))
                    except Exception as exc:  # unknown: keep it quarantined
                        log.debug("rdma: state of a timed-out READ: %s", exc)
                        states.append("?")
                settled = all(st in ("DONE", "ERR") for st in states)
                if settled:
                    for handle in buf.handles:
                        _quiet(self._agent.release_xfer_handle, handle)
                    buf.handles.clear()
            if settled:
                buf.array[:] = 0  # whatever the late READ landed is not ours to keep
                buf.poisoned = False
                self._count("reclaimed")
                self._give_back(buf)
            else:
                keep.append(buf)
        with self._pool_lock:
            self._quarantine.extend(keep)

    # ---- READ ----

    def _read_checked(self, buf: Buffer, desc: Descriptor, deadline: float) -> None:
        failed: Peer | None = None
        for attempt in range(2):
            peer = self._peer(desc, failed, deadline)
            try:
                self._read(buf, desc, peer, deadline)
                break
            except _TransferFailed as exc:
                if attempt or buf.poisoned:
                    self._count("errors")
                    raise PullError(f"READ of {desc.nbytes} bytes from {desc.agent} at "
                                    f"{desc.host}:{desc.port} failed: {exc}") from None
                self._count("refreshes")
                log.info("rdma: READ from %s failed (%s); refreshing its metadata", desc.agent, exc)
                failed = peer
        try:
            check_frame(buf.array, desc)
        except StaleSlotError:
            self._count("stale")
            raise
        self._notify(peer.name, desc.key)  # the bytes are ours now: the exporter may reuse the slot

    def _notify(self, peer: str, key: str) -> None:
        self._notifier.send(peer, key)

    def _peer(self, desc: Descriptor, failed: Peer | None, deadline: float) -> Peer:
        """The connected exporter at the handle's address.

        Fetches its metadata when unknown, when the handle names another agent, or when `failed` (a
        connection that just failed a READ) is still the one registered. One fetch per address at a
        time; other addresses and pulls over the current connection are not held up."""
        where = (desc.host, desc.port)
        peer = self._peers.get(where)
        if peer is not None and peer.name == desc.agent and peer is not failed:
            return peer
        with self._peer_lock:
            lock = self._peer_locks.setdefault(where, threading.Lock())
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise PullError(f"timed out waiting for the metadata of {desc.host}:{desc.port}")
        try:
            peer = self._peers.get(where)  # another thread may have refreshed it meanwhile
            if peer is not None and peer.name == desc.agent and peer is not failed:
                return peer
            name, metadata = self._fetch(desc, deadline)
            if peer is not None and peer is not failed and name == peer.name:
                # Still the exporter we know: the handle comes from an earlier one.
                self._count("stale")
                raise StaleSlotError(f"the exporter at {desc.host}:{desc.port} restarted (now "
                                     f"{peer.name}, the handle is from {desc.agent})")
            if peer is not None:  # restarted exporter, or a broken connection
                with self._lock:
                    _quiet(self._agent.remove_remote_agent, peer.name)
                self._notifier.remove_peer(peer.name)
                del self._peers[where]
            with self._lock:
                try:
                    self._agent.add_remote_agent(metadata)
                except Exception as exc:
                    self._count("errors")
                    raise PullError(f"NIXL rejected the metadata of {name}: {exc}") from None
            self._notifier.add_peer(metadata)
            peer = self._peers[where] = Peer(name)
        finally:
            lock.release()
        if peer.name != desc.agent:
            self._count("stale")
            raise StaleSlotError(f"the exporter at {desc.host}:{desc.port} restarted (now "
                                 f"{peer.name}, the handle is from {desc.agent})")
        return peer

    def _fetch(self, desc: Descriptor, deadline: float) -> tuple[str, bytes]:
        """The exporter's (name, metadata).

        A connection the exporter closed before answering (it makes room that way when a connect
        flood fills its table) is retried, twice at most and within the deadline; refused or
        timed-out connections are not."""
        for attempt in range(3):
            timeout = max(0.05, min(self.metadata_timeout_s, deadline - time.monotonic()))
            try:
                return fetch_metadata(desc.host, desc.port, timeout)
            except OSError as exc:
                dropped = isinstance(exc, (ConnectionResetError, BrokenPipeError)) or \
                    type(exc) is ConnectionError  # "closed the metadata connection early"
                if not dropped or attempt == 2 or time.monotonic() + 0.05 >= deadline:
                    self._count("errors")
                    raise PullError(f"cannot reach the exporter at {desc.host}:{desc.port}: "
                                    f"{exc}") from None
                self._count("metadata_retries")
        raise AssertionError("unreachable")

    def _read(self, buf: Buffer, desc: Descriptor, peer: Peer, deadline: float) -> None:
        step = self.chunk_bytes or desc.frame_len
        for off in range(0, desc.frame_len, step):
            n = min(step, desc.frame_len - off)
            with self._lock:
                try:
                    local = self._agent.get_xfer_descs([(buf.addr + off, n, 0)], "DRAM")
                    remote = self._agent.get_xfer_descs([(desc.addr + off, n, 0)], "DRAM")
                    handle = self._agent.initialize_xfer("READ", local, remote, peer.name)
                except Exception as exc:  # this handle's range, not the connection: no refresh
                    self._count("errors")
                    raise PullError(f"NIXL refused a READ of {desc.frame_len} bytes at "
                                    f"{desc.addr:#x} from {desc.agent} (not memory the exporter "
                                    f"registered?): {exc}") from None
                try:
                    state = self._agent.transfer(handle)
                except Exception as exc:
                    _quiet(self._agent.release_xfer_handle, handle)
                    raise _TransferFailed(exc) from None
            while state != "DONE":
                if state == "ERR":
                    with self._lock:
                        _quiet(self._agent.release_xfer_handle, handle)
                    raise _TransferFailed("transfer state ERR")
                if time.monotonic() > deadline:
                    buf.poisoned = True  # quarantined with the transfer still attached
                    buf.handles.append(handle)
                    self._count("timeouts")
                    raise PullError(f"READ of {desc.nbytes} bytes from {desc.agent} timed out")
                time.sleep(0)
                with self._lock:
                    try:
                        state = self._agent.check_xfer_state(handle)
                    except Exception as exc:
                        _quiet(self._agent.release_xfer_handle, handle)
                        raise _TransferFailed(exc) from None
            with self._lock:
                self._agent.release_xfer_handle(handle)
            if off + n < desc.frame_len:
                time.sleep(0)  # let other threads run between pieces

    def _count(self, name: str) -> None:
        with self._pool_lock:
            self.counters[name] += 1


class _TransferFailed(Exception):
    pass


# NIXL aborts the process ("terminate called without an active exception") when an agent with
# connected peers is destroyed unclosed: pullers close when collected (__del__) and, for those
# still alive at interpreter exit, here, while threads still run.
_LIVE: weakref.WeakSet[Puller] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for puller in list(_LIVE):
        puller.close()


def _quiet(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:
        log.debug("rdma: %s failed: %s", getattr(fn, "__name__", fn), exc)


__all__ = ["DEFAULT_TIMEOUT_S", "Puller"]
