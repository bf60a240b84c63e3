"""The server's RDMA lane.

When and whether the NIXL exporter runs, and why an item did not go by rdma.

The exporter starts at server start when rdma is the default transport, else on the first request
that asks for rdma (in the background; items fall back meanwhile). Before touching NIXL in this
process a preflight runs in a child process, so a broken NIXL disables the lane instead of taking
the server down. Every item that asked for rdma and did not get it is counted by reason and the
first of each reason is logged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from ..transport.rdma import Descriptor, Exporter, ExportLease, ExportRefused, RdmaUnavailable
from ..transport.rdma.preflight import run_preflight
from .config import ServerConfig

log = logging.getLogger("smg_fast.server")


class RdmaLane:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.exporter: Exporter | None = None
        self.state = "off"  # off -> starting -> ready | unavailable
        self.reason = "starting"  # fallback reason while not ready
        self._lock = threading.Lock()
        self._started = threading.Event()  # set once the start (either outcome) is over
        self._warned: set[str] = set()
        self._closing = False

    # ---- lifecycle ----

    def start(self) -> bool:
        """Preflight + exporter, blocking (also when another thread already started them).

        True when the lane is ready. Never raises: any failure marks the lane unavailable."""
        with self._lock:
            if self._closing and self.state == "off":  # a request during shutdown: stay off
                self.state, self.reason = "unavailable", "closed"
                self._started.set()
            starting_here = self.state == "off"
            if starting_here:
                self.state = "starting"
        if not starting_here:
            self._started.wait()
            return self.ready
        exporter = None
        reason, detail = "agent_failed", "the exporter did not start"
        try:
            exporter, reason, detail = self._make_exporter()
        except BaseException as exc:  # a raw NIXL error, a broken preflight: never stay "starting"
            reason, detail = "agent_failed", f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                closing = self._closing
                if exporter is not None and not closing:
                    self.exporter, self.state = exporter, "ready"
                else:
                    self.state, self.reason = "unavailable", reason or "agent_failed"
                    if closing and exporter is not None:
                        reason, detail = "closed", "the server closed while the lane started"
            self._started.set()
            if closing and exporter is not None:  # close() did not wait for us: clean up here
                exporter.close()
                exporter = None
        if exporter is None and reason != "closed":
            log.error("rdma transport disabled (%s): %s; rdma requests go by shm/inline",
                      reason, detail)
        return exporter is not None

    def _make_exporter(self) -> tuple[Exporter | None, str, str]:
        cfg = self.config
        reason, detail = run_preflight()
        if reason is not None:
            return None, reason, detail
        try:
            exporter = Exporter(slots=cfg.rdma_slots, slot_bytes=cfg.rdma_slot_bytes,
                                ttl_s=cfg.rdma_slot_ttl_s, listen_host=cfg.rdma_listen_host,
                                listen_port=cfg.rdma_listen_port,
                                caller_slots=cfg.rdma_caller_slots_limit)
        except RdmaUnavailable as exc:
            return None, exc.reason, exc.detail
        except (MemoryError, ValueError) as exc:
            return None, "agent_failed", f"arena of {cfg.rdma_arena_bytes} bytes: {exc}"
        return exporter, "", ""

    def start_background(self) -> None:
        if self.state == "off":
            threading.Thread(target=self.start, name="smg-fast-rdma-start", daemon=True).start()

    @property
    def ready(self) -> bool:
        return self.exporter is not None

    def close(self) -> None:
        """Stops the exporter.

        Called from the event loop: never waits for a start still in progress (that start closes
        what it makes); the exporter's own close is bounded."""
        with self._lock:
            self._closing = True
            exporter = self.exporter
            self.exporter = None
        if exporter is not None:
            exporter.close()

    def wait_released(self, timeout_s: float) -> bool:
        return self.exporter is None or self.exporter.wait_released(timeout_s)

    # ---- exporting ----

    def lease(self, nbytes: int, caller: str = "") -> tuple[ExportLease | None, str]:
        """(lease, "") or (None, fallback reason); counted against caller's share of slots."""
        return self._try("lease", nbytes, nbytes, caller)

    def export_array(self, array: np.ndarray, caller: str = "") -> tuple[Descriptor | None, str]:
        """(descriptor of a copy in a slot, "") or (None, fallback reason)."""
        return self._try("export_array", array.nbytes, array, caller)

    def _try(self, method: str, nbytes: int, arg: Any, caller: str) -> tuple[Any, str]:
        if nbytes < self.config.rdma_min_bytes:
            return None, "below_min_bytes"
        exporter = self.exporter
        if exporter is None:
            self.start_background()
            return None, self.reason
        try:
            return getattr(exporter, method)(arg, caller), ""
        except ExportRefused as exc:
            return None, exc.reason

    def free(self, key: str) -> None:
        if self.exporter is not None:
            self.exporter.free(key)

    def note_fallback(self, reason: str, used: str) -> None:
        """Logs the first fallback of each reason (the caller counts every one)."""
        if reason in self._warned or reason == "below_min_bytes":
            return
        self._warned.add(reason)
        hints = {"arena_full": "raise --rdma-slots, or pullers are not confirming reads",
                 "arena_share": "a caller holds its share of the slots (--rdma-caller-slots): "
                                "its puller is not confirming reads, or it pulls more at once",
                 "too_large": f"tensor over the {self.config.rdma_slot_bytes} byte slot: raise "
                              "--rdma-slot-mb or use bfloat16",
                 "starting": "the exporter is still starting"}
        log.warning("rdma: item sent by %s instead (%s%s); counted in smg_fast_fallback_total",
                    used, reason, f": {hints[reason]}" if reason in hints else "")

    def stats(self) -> dict[str, Any]:
        if self.exporter is None:
            return {"ready": 0}
        return {"ready": 1, **self.exporter.stats()}
