"""A server on its own event loop thread.

For tests, and for embedding in a synchronous program."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .._service.grpc_server import address
from .app import Server
from .config import ServerConfig


class BackgroundServer:
    """A server on its own event loop thread (tests, embedding in a synchronous program)::

        with BackgroundServer(ServerConfig(port=0)) as srv:
            client = Client(f"127.0.0.1:{srv.port}")
    """

    def __init__(self, config: ServerConfig) -> None:
        self.server = Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    @property
    def target(self) -> str:
        return address(self.server.config.host, self.port)

    def start(self, timeout: float = 60.0) -> BackgroundServer:
        self._thread = threading.Thread(target=self._run, name="smg-fast-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("server did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self.server.wait_stopped()

        asyncio.run(main())

    def stop(self, timeout: float | None = None) -> None:
        """Drains and stops (timeout: the drain budget, default the config's)."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.server.stop(timeout), self._loop)
        fut.result()
        self._thread.join(10)

    def call(self, fn: Any, *args: Any) -> Any:
        """Runs fn(*args) on the server's loop (e.g. to start a stop without waiting)."""
        assert self._loop is not None
        return self._loop.call_soon_threadsafe(fn, *args)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
