"""The exporter: the server side of the RDMA lane.

Owns a native slot arena registered once with a NIXL agent. A tensor is written straight into a
leased slot (the native processor writes its output there; other arrays are copied in with the
GIL released) and handed out as a RemoteTensorHandle. One background thread answers metadata
requests, drains NIXL notifications (tag = lease key) to free slots, and reaps leases whose
notification never came. With ``caller_slots``, each caller (a name the producer gives) holds at
most that many slots at once (shares.py); past it a lease is refused ("arena_share").
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import selectors
import socket
import threading
import time
import weakref
from typing import Any

import numpy as np

from ... import _native
from .descriptor import TRANSPORT, Descriptor
from .errors import ExportRefused, RdmaUnavailable
from .metadata_server import (  # noqa: F401  (the caps: their old home)
    MAX_METADATA_CONNECTIONS,
    MAX_METADATA_PER_PEER,
    MetadataServer,
)
from .nixl import load_nixl, make_agent, metadata_answer, register
from .shares import CallerShares

log = logging.getLogger("smg_fast.rdma")

DEFAULT_SLOTS = 8
DEFAULT_SLOT_BYTES = 32 << 20
DEFAULT_PORT = 18515
BUSY_POLL_S = 0.001  # notification polling while leases are out
IDLE_POLL_S = 0.02
_MAX_NOTIF = 256  # a key is 32 hex characters; longer notifications are not ours


class ExportLease:
    """A leased slot being written.

    ``array()`` is the payload region; ``commit()`` returns the descriptor to send; ``abort()``
    frees the slot unused. One of the two must be called."""

    def __init__(self, exporter: Exporter, key: str, info: dict[str, int]) -> None:
        self._exporter = exporter
        self.key = key
        self.nbytes = info["payload_len"]
        self._info = info
        self._done = False

    def array(self, dtype: Any = np.uint8) -> np.ndarray:
        view = self._exporter.arena.view(self._info["payload_offset"], self.nbytes)
        return view.view(dtype)

    def commit(self) -> Descriptor:
        self._done = True
        exporter = self._exporter
        if not exporter.arena.commit(self.key):
            exporter.released(self.key)
            raise ExportRefused("lease_expired", "the lease expired while it was written")
        if exporter.shares is not None:
            exporter.shares.committed(self.key)
        return exporter.descriptor(self.key, self._info)

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self._exporter.arena.abort(self.key)
            self._exporter.released(self.key)


class Exporter:
    """Serves tensors from a registered slot arena to pullers in other processes."""

    def __init__(self, *, slots: int = DEFAULT_SLOTS, slot_bytes: int = DEFAULT_SLOT_BYTES,
                 ttl_s: float, listen_host: str = "127.0.0.1", listen_port: int = DEFAULT_PORT,
                 advertise_host: str | None = None, metadata_timeout_s: float = 2.0,
                 caller_slots: int | None = None) -> None:
        """Raises RdmaUnavailable (with the fallback reason) when the lane cannot start.

        caller_slots: the most slots one caller may hold at once (None: no share)."""
        if slots < 1 or slot_bytes < 4096:
            raise ValueError("need at least one slot of at least 4096 bytes")
        if caller_slots is not None and not 1 <= caller_slots <= slots:
            raise ValueError(f"caller_slots must be 1..{slots}, got {caller_slots}")
        self.shares = CallerShares(caller_slots, ttl_s) if caller_slots is not None else None
        nixl = load_nixl()
        self.instance = secrets.token_hex(4)
        self.name = f"smg-fast-{socket.gethostname()}-{os.getpid()}-{self.instance}"
        self._sock = self._listen(listen_host, listen_port)
        self.host = advertise_host or _advertised(listen_host)
        self.port = self._sock.getsockname()[1]
        self._metadata_timeout_s = metadata_timeout_s
        self._meta: MetadataServer | None = None  # made by the thread, with its selector
        self._meta_counters = {"metadata_served": 0, "metadata_dropped": 0,
                               "bad_notifications": 0}
        self._closed = False
        self._reap_ahead_s = 0.0  # advance_reap_clock()
        # Whoever finishes last of close() and the thread frees sockets and registration: a
        # thread still inside a NIXL call must not have them freed under it.
        self._cleanup_lock = threading.Lock()
        self._loop_done = False
        self._cleanup_deferred = False
        try:
            slot_bytes = (slot_bytes + 63) // 64 * 64
            self.arena = _native.SlotArena(slots, slot_bytes, ttl_s)
            self._agent = make_agent(nixl, self.name)
            self._reg = register(self._agent, self.arena.address, self.arena.size)
            self._metadata = self._agent.get_agent_metadata()
        except BaseException:
            self._sock.close()
            raise
        self._stop = threading.Event()
        # A new lease wakes the thread from its idle wait, so it polls fast while slots are out.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._thread = threading.Thread(target=self._run, name="smg-fast-rdma-exporter",
                                        daemon=True)
        self._thread.start()
        _LIVE.add(self)
        log.info("rdma exporter %s: %d slots x %.1f MiB registered, metadata on %s:%d",
                 self.name, slots, slot_bytes / 2**20, self.host, self.port)

    @staticmethod
    def _listen(host: str, port: int) -> socket.socket:
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
            sock.setblocking(False)
            return sock
        except OSError as exc:
            raise RdmaUnavailable("listen_failed", f"cannot listen on {host}:{port}: "
                                  f"{exc.strerror or exc}") from None

    # ---- producing ----

    @property
    def max_payload(self) -> int:
        return int(self.arena.max_payload)

    def lease(self, nbytes: int, caller: str = "") -> ExportLease:
        """A slot for an nbytes payload, leased for caller.

        ExportRefused "too_large", "arena_full", or "arena_share" (caller holds its share)."""
        key, info = self._take(self.arena.lease, nbytes, caller, committed=False)
        return ExportLease(self, key, info)

    def export_array(self, array: np.ndarray, caller: str = "") -> Descriptor:
        """Copies a C-contiguous array into a slot (parallel copy, GIL released)."""
        src = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        key, info = self._take(self.arena.copy_in, src, caller, committed=True)
        return self.descriptor(key, info)

    def _take(self, fn: Any, arg: Any, caller: str,
              committed: bool) -> tuple[str, dict[str, int]]:
        shares = self.shares
        if shares is not None and not shares.take(caller):
            raise ExportRefused("arena_share", f"this caller holds its {shares.per_caller} of "
                                               f"the {self.arena.slots} slots")
        try:
            # The key is the lease's secret: only the client the handle goes to can free it.
            key, info = call_arena(fn, secrets.token_hex(16), arg)
            if info is None:
                raise ExportRefused("arena_full", f"all {self.arena.slots} slots are leased")
        except BaseException:
            if shares is not None:
                shares.untake(caller)
            raise
        if shares is not None:
            shares.bind(key, caller, committed)
        self._wake()
        return key, info

    def released(self, key: str) -> None:
        """key's slot is free again: its caller's place too."""
        if self.shares is not None:
            self.shares.released(key)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):  # already has a wake-up pending, or closing
            pass

    def descriptor(self, key: str, info: dict[str, int]) -> Descriptor:
        return Descriptor(agent=self.name, host=self.host, port=self.port,
                          addr=self.arena.address + info["frame_offset"],
                          frame_len=info["frame_len"], nbytes=info["payload_len"],
                          generation=info["generation"], key=key)

    def free(self, key: str) -> bool:
        """Releases a committed lease (a slot still being written is refused)."""
        if not self.arena.free(key):
            return False
        self.released(key)
        return True

    def advance_reap_clock(self, seconds: float) -> None:
        """Makes the reaper judge leases as if `seconds` more had passed.

        For tests: a TTL that starts counting once the test has checked what it must see before
        it."""
        self._reap_ahead_s = float(seconds)
        self._wake()

    def stats(self) -> dict[str, int]:
        out = dict(self.arena.counters())
        out.update(self._meta_counters)
        out["slots"] = self.arena.slots
        out["slot_bytes"] = self.arena.slot_bytes
        if self.shares is not None:
            out.update(self.shares.stats())
        return out

    def wait_released(self, timeout_s: float) -> bool:
        """Waits until every lease is freed or reaped (for draining); True when none is left."""
        deadline = time.monotonic() + timeout_s
        while self.arena.in_use:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    # ---- background thread ----

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        meta = self._meta = MetadataServer(self._sock, sel,
                                           metadata_answer(self.name, self._metadata),
                                           self._metadata_timeout_s, self._meta_counters)
        sel.register(self._wake_r, selectors.EVENT_READ)
        next_reap = 0.0
        reap_every = min(1.0, self.arena.ttl_s / 4)
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    busy = self.arena.in_use > 0
                    wait = BUSY_POLL_S if busy else IDLE_POLL_S
                    ready = sel.select(wait)
                    if any(sk.fileobj is self._wake_r for sk, _ in ready):
                        self._drain_wake()
                    meta.handle(ready, time.monotonic())
                    if self._stop.is_set():
                        break
                    for msgs in self._agent.get_new_notifs().values():
                        for msg in msgs:
                            # Frees only a committed lease, and only with its secret key;
                            # anything else (forged, late, duplicate) changes nothing, counted.
                            if len(msg) > _MAX_NOTIF or not self.free(
                                    msg.decode("utf-8", "replace")):
                                self._meta_counters["bad_notifications"] += 1
                    now = time.monotonic()
                    if now >= next_reap:
                        ahead = self._reap_ahead_s
                        if self.arena.reap_after(ahead):
                            log.warning("rdma: reaped leases whose puller never confirmed "
                                        "(ttl %.0f s)", self.arena.ttl_s)
                        if self.shares is not None:
                            self.shares.reaped(now + ahead)
                        next_reap = now + reap_every
                    failures = 0
                except Exception:  # keep serving; a persistent fault is logged, not spun on
                    failures += 1
                    if failures in (1, 100) or failures % 10000 == 0:
                        log.exception("rdma exporter loop error (%d in a row)", failures)
                    self._stop.wait(min(0.1, 0.001 * failures))
        finally:
            meta.close()
            sel.close()
            with self._cleanup_lock:
                self._loop_done = True
                deferred = self._cleanup_deferred
            if deferred:  # close() gave up waiting for us: we are the last user
                self._release()
                log.info("rdma exporter %s: thread ended late; resources released", self.name)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self, join_timeout_s: float = 2.0) -> None:
        """Stops the thread and deregisters the arena (leases still out are dropped).

        The thread is woken and normally ends within one poll; if it does not end within
        join_timeout_s (stuck in a NIXL call), nothing it may still use is freed here: it frees them
        itself when it ends, or the process exit does."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake()
        self._thread.join(timeout=join_timeout_s)
        with self._cleanup_lock:
            if not self._loop_done:
                self._cleanup_deferred = True
                log.warning("rdma exporter %s: thread still busy after %.1f s; its sockets and "
                            "registration are released when it ends", self.name, join_timeout_s)
                return
        self._release()

    def _release(self) -> None:
        self._sock.close()
        self._wake_r.close()
        self._wake_w.close()
        try:
            self._agent.deregister_memory(self._reg)
        except Exception as exc:
            log.debug("rdma deregistration failed: %s", exc)

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call_arena(fn: Any, key: str, arg: Any) -> tuple[str, dict[str, int] | None]:
    """(key, fn(key, arg)) with the arena's failures typed.

    A payload too large for a slot is ExportRefused("too_large"); the kernel refusing random bytes
    (getrandom) or memory is ExportRefused("arena_error"), which the lane counts as a fallback."""
    try:
        return key, fn(key, arg)
    except ValueError as exc:
        raise ExportRefused("too_large", str(exc)) from None
    except (RuntimeError, MemoryError) as exc:
        raise ExportRefused("arena_error", f"{type(exc).__name__}: {exc}") from None


_LIVE: weakref.WeakSet[Exporter] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Closes exporters before interpreter exit tears NIXL down under running threads."""
    for exporter in list(_LIVE):
        exporter.close()


def _advertised(listen_host: str) -> str:
    if listen_host in ("0.0.0.0", "::", ""):
        return socket.getfqdn()
    return listen_host


__all__ = ["DEFAULT_PORT", "DEFAULT_SLOTS", "DEFAULT_SLOT_BYTES", "ExportLease", "Exporter",
           "MetadataServer", "TRANSPORT", "call_arena"]
