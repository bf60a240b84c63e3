"""Server (and router) processes on loopback for tests and benchmarks.

A free port, start, wait until SERVING, stop (SIGTERM, then SIGKILL). One place for what the test
suite, bench.latency and the fleet benchmarks all need."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on host right now (the caller binds it soon after)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_serving(target: str, proc: subprocess.Popen | None = None,
                 timeout: float = 120.0) -> None:
    """Polls target's health until SERVING.

    Raises RuntimeError if proc exits first and TimeoutError after timeout seconds."""
    import grpc

    from ..client import Client

    deadline = time.monotonic() + timeout
    with Client(target) as c:
        while True:
            if proc is not None and proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"server exited with {proc.returncode}: {err!s}")
            try:
                if c.health(timeout=1) == "SERVING":
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target} did not become SERVING in {timeout:.0f} s")
            time.sleep(0.1)


class ServerProcess:
    """``python -m smg_fast.server`` on a free loopback port::

        with ServerProcess(["--transport", "shm"]) as srv:
            Client(srv.target).preprocess(...)
    """

    module = "smg_fast.server"

    def __init__(self, args: list[str] | tuple[str, ...] = (), *, env: dict[str, str] | None = None,
                 host: str = "127.0.0.1", port: int | None = None,
                 stderr: Any = subprocess.PIPE, address_flags: bool = True) -> None:
        """address_flags=False.

        --host and --port are not passed (the process reads its address from env or args; host and
        port say where that is)."""
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.target = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        address = ["--host", host, "--port", str(self.port)] if address_flags else []
        cmd = [sys.executable, *self.launcher(), *address, *args]
        self.proc = subprocess.Popen(cmd, env=dict(os.environ, **(env or {})),
                                     stdout=subprocess.DEVNULL, stderr=stderr, text=True)

    def launcher(self) -> list[str]:
        """What follows the interpreter on the command line, before the server's options."""
        return ["-m", self.module]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 120.0) -> ServerProcess:
        wait_serving(self.target, self.proc, timeout)
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (drain), SIGKILL after timeout; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> ServerProcess:
        try:
            return self.wait()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class RouterProcess(ServerProcess):
    """``python -m smg_fast.router --worker ...`` on a free loopback port.

    It is SERVING once some worker serves::

        with RouterProcess([s.target for s in servers]) as router:
            Client(router.target).preprocess(...)
    """

    module = "smg_fast.router"

    def __init__(self, workers: list[str], args: list[str] | tuple[str, ...] = (),
                 **kwargs: Any) -> None:
        super().__init__([a for w in workers for a in ("--worker", w)] + list(args), **kwargs)
