"""The /metrics endpoint of a real server process: no thread per connection, bounded requests.

Idle connections held open do not add threads to the process (Prometheus' own threaded server
started one each), and a scrape is answered while the endpoint is full of them; a request head
over the limit, another method or another path get nothing, 405 or 404."""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request

from smg_fast._service.metrics import MAX_CONNECTIONS, MAX_HEAD
from smg_fast.testing.servers import ServerProcess, free_port


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _scrape(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_idle_connections_cost_no_threads():
    port = free_port()
    with ServerProcess(["--workers", "1", "--metrics-port", str(port)]) as srv:
        status, body = _scrape(port)
        assert status == 200 and b"smg_fast_requests_total" in body
        before = _threads(srv.pid)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(MAX_CONNECTIONS)]
        try:
            for s in idle:  # a byte each: every connection is accepted and being read
                s.sendall(b"G")
            during = _threads(srv.pid)
            assert during <= before + 2, (before, during)
            # the endpoint is full of silent connections: a scrape closes the oldest of them
            assert _scrape(port)[0] == 200
        finally:
            for s in idle:
                s.close()
        assert _scrape(port)[0] == 200
        assert _scrape(port, "/other")[0] == 404
        assert _scrape(port, method="POST")[0] == 405
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (2 * MAX_HEAD) + b"\r\n\r\n")
            s.settimeout(10)
            try:
                assert s.recv(100) == b""  # closed, nothing answered
            except ConnectionResetError:
                pass


def test_scrape_after_a_flood():
    """More connections than the cap, then gone: scrapes go on."""
    port = free_port()
    with ServerProcess(["--workers", "1", "--metrics-port", str(port)]):
        flood = [socket.create_connection(("127.0.0.1", port))
                 for _ in range(2 * MAX_CONNECTIONS)]
        for s in flood:
            s.close()
        assert _scrape(port)[0] == 200
