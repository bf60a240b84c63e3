"""Members found at run time: a DNS name and a watched file, real servers on loopback addresses.

The names are answered by a name server the test runs on 127.0.0.1, and by the system's resolver.

Members join live after the same config checks as any member (one with another config is refused),
leave once their calls in flight ended (a slow image placed on a member that leaves the DNS answer
still succeeds there), a member that goes down makes the fleet read the name again at once, a failed
A or AAAA query keeps the members, a file rewritten by an orchestrator is followed (read off the
event loop), and the router process follows both."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading

import pytest
from support.dns_server import DnsServer
from support.routing_common import SERVER_ARGS, check, first_choice, png, stop

from smg_fast import load_processor
from smg_fast.client import Client
from smg_fast.routing import AsyncRoutedClient, dns_wire
from smg_fast.routing.discovery import Discovery, read_targets, resolve
from smg_fast.routing.dns_message import AAAA
from smg_fast.testing.servers import RouterProcess, ServerProcess

HOSTS = ("127.0.0.2", "127.0.0.3", "::1")


def _common_port(hosts) -> int:
    """A port free on every host."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            for h in hosts:
                with socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET) as t:
                    t.bind((h, port))
        except OSError:
            continue
        return port
    raise AssertionError("no common free port")


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _until(cond, what: str, limit: float = 20.0) -> None:
    """Waits until cond() (a bound for a broken fleet, not a measured time)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not cond():
        assert loop.time() < end, what
        await asyncio.sleep(0.02)


def _serving(fleet) -> set[str]:
    return {t for t, m in fleet.stats()["members"].items() if m["state"] == "serving"}


def test_dns_answers_and_their_resolution():
    """Our A/AAAA client against the test's name server; NXDOMAIN is no member; localhost too."""
    with DnsServer({"enc.test": ["127.0.0.2", "::1", "127.0.0.3"], "none.test": []}) as dns:
        at = f"dns://127.0.0.1:{dns.port}"
        assert asyncio.run(resolve(f"{at}/ENC.test.:80")) == [
            "127.0.0.2:80", "127.0.0.3:80", "[::1]:80"]
        assert asyncio.run(resolve(f"{at}/missing.test:80")) == []
        assert asyncio.run(resolve(f"{at}/none.test:80")) == []
    assert "127.0.0.1:80" in asyncio.run(resolve("dns:///localhost:80"))


def test_members_follow_a_dns_name(images):
    """Join, refusal, drain-aware leave and re-resolution on failure, through a DNS name."""
    imgs, refs = images(12)
    port = _common_port((*HOSTS, "127.0.0.4"))
    servers = [ServerProcess(SERVER_ARGS, host=h, port=port) for h in HOSTS]
    # another config under the same model name: refused wherever it is found
    servers.append(ServerProcess([*SERVER_ARGS, "--model", "qwen2_vl=qwen2_5_vl"],
                                 host="127.0.0.4", port=port))
    a, b, c, odd = (_target(h, port) for h in (*HOSTS, "127.0.0.4"))
    slow = next(im for im in (png(2000, 1500, s) for s in range(2000, 2100))
                if first_choice(im, [a, b, c]) == a)
    slow_ref = load_processor("qwen2_vl")(slow)["pixel_values"]
    try:
        for s in servers:
            s.wait()
        with DnsServer({"enc.test": [HOSTS[0]]}) as dns:
            spec = f"dns://127.0.0.1:{dns.port}/enc.test:{port}"

            async def main() -> None:
                async with AsyncRoutedClient(spec, resolve_every_s=0.2, floor=1) as fleet:
                    out = await fleet.preprocess(imgs[:3])
                    check(out, [0, 1, 2], refs)
                    assert {it.worker for it in out.items} == {a}
                    dns.set("enc.test", [*HOSTS, "127.0.0.4"])
                    await _until(lambda: _serving(fleet) == {a, b, c}, "members did not join")
                    await _until(lambda: fleet.stats()["members"][odd]["state"] == "refused",
                                 "the other config was not refused")
                    out = await fleet.preprocess(imgs)
                    check(out, list(range(12)), refs)
                    assert {it.worker for it in out.items} == {a, b, c}
                    # a leaves the answer while a slow image is in flight there: it ends there
                    task = asyncio.ensure_future(fleet.preprocess([slow], timeout=60))
                    await _until(lambda: fleet.membership.members[a].in_flight > 0,
                                 "the slow image was not placed")
                    dns.set("enc.test", HOSTS[1:])
                    fleet.discovery.poke()
                    await _until(lambda: a not in fleet.membership.members
                                 or fleet.membership.members[a].retiring, "a did not retire")
                    assert not task.done()  # (it left while the image was in flight there)
                    out = await task
                    check(out, [0], [slow_ref])
                    assert out.items[0].worker == a
                    await _until(lambda: a not in fleet.stats()["members"], "a did not leave")
                    out = await fleet.preprocess(imgs)
                    check(out, list(range(12)), refs)
                    assert {it.worker for it in out.items} <= {b, c}
                    # a member going down makes the fleet ask again at once (the period is long)
                    fleet.discovery.every_s = 3600.0
                    await asyncio.sleep(0.5)  # (the loop now waits out its long period)
                    dns.set("enc.test", [HOSTS[2], HOSTS[0]])
                    asked = dns.queries
                    servers[1].proc.send_signal(signal.SIGKILL)
                    await _until(lambda: _serving(fleet) == {a, c}, "no re-read on failure")
                    assert dns.queries > asked
                    await _until(lambda: b not in fleet.stats()["members"], "b did not leave")
                    out = await fleet.preprocess(imgs)
                    check(out, list(range(12)), refs)

            asyncio.run(main())
    finally:
        stop(servers)


def test_members_follow_a_watched_file(images, tmp_path):
    """A file an orchestrator rewrites: members join and leave; a bad line is skipped."""
    imgs, refs = images(6)
    servers = [ServerProcess(SERVER_ARGS) for _ in range(2)]
    x, y = (s.target for s in servers)
    path = tmp_path / "workers"
    path.write_text(f"# the fleet\n{x}\n")
    try:
        for s in servers:
            s.wait()

        async def main() -> None:
            async with AsyncRoutedClient(f"file://{path}", resolve_every_s=0.2, floor=1) as fleet:
                check(await fleet.preprocess(imgs), list(range(6)), refs)
                path.write_text(f"{x}\nnot a target\n{y}  # added\n")
                await _until(lambda: _serving(fleet) == {x, y}, "y did not join")
                out = await fleet.preprocess(imgs)
                check(out, list(range(6)), refs)
                path.write_text(f"{y}\n")
                await _until(lambda: x not in fleet.stats()["members"], "x did not leave")
                out = await fleet.preprocess(imgs)
                check(out, list(range(6)), refs)
                assert {it.worker for it in out.items} == {y}

        asyncio.run(main())
    finally:
        stop(servers)
    assert read_targets(str(path)) == [y]


def test_a_failing_family_keeps_the_members(images, monkeypatch, caplog):
    """A answers while AAAA fails (SERVFAIL, then no answer): both members stay and serve."""
    monkeypatch.setattr(dns_wire, "TIMEOUT_S", 0.2)
    caplog.set_level(logging.WARNING, "smg_fast.routing")
    imgs, refs = images(6)
    hosts = ("127.0.0.2", "::1")
    port = _common_port(hosts)
    servers = [ServerProcess(SERVER_ARGS, host=h, port=port) for h in hosts]
    v4, v6 = (_target(h, port) for h in hosts)
    try:
        for s in servers:
            s.wait()
        with DnsServer({"enc.test": list(hosts)}) as dns:
            spec = f"dns://127.0.0.1:{dns.port}/enc.test:{port}"

            async def main() -> None:
                async with AsyncRoutedClient(spec, resolve_every_s=0.1, floor=1) as fleet:
                    await _until(lambda: _serving(fleet) == {v4, v6}, "members did not join")
                    for how in ("servfail", "silent"):
                        dns.fail[AAAA] = how
                        due = fleet.discovery.rounds + 2  # (the second round to end began after)
                        await _until(lambda d=due: fleet.discovery.rounds >= d, "no re-read")
                        assert _serving(fleet) == {v4, v6}, how
                        assert not fleet.stats()["discovery"]["retiring"], how
                        check(await fleet.preprocess(imgs), list(range(6)), refs)
                    dns.fail.clear()
                    dns.set("enc.test", [hosts[0]])  # an answer still counts once one comes
                    await _until(lambda: v6 not in fleet.stats()["members"], "v6 did not leave")

            asyncio.run(main())
    finally:
        stop(servers)
    assert "IPv6 family failed" in caplog.text and "keeping its 1 address(es)" in caplog.text


def test_a_watched_file_is_read_off_the_event_loop(tmp_path):
    """A file whose open blocks (a FIFO no one writes yet) leaves the event loop running."""
    fifo = tmp_path / "workers"
    os.mkfifo(fifo)
    loop_ran = threading.Event()
    waited = []

    def writer() -> None:
        waited.append(loop_ran.wait(10.0))  # (a bound: a blocked loop fails the test, not hangs)
        with open(fifo, "w") as f:
            f.write("127.0.0.1:1\n# a comment\n127.0.0.1:2\n")

    async def noop(joined: list[str], left: list[str]) -> None:
        pass

    async def main() -> list[str]:
        discovery = Discovery([f"file://{fifo}"], 3600.0, noop)
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        reading = asyncio.ensure_future(discovery.read())
        await asyncio.sleep(0)  # the read starts: on the loop, its open would block it here
        assert not reading.done()
        loop_ran.set()
        got = await reading
        thread.join()
        return got

    assert asyncio.run(main()) == ["127.0.0.1:1", "127.0.0.1:2"]
    assert waited == [True]


@pytest.mark.parametrize("how", ["server", "system"])
def test_router_follows_dns(images, how):
    """The router process with a dns: worker, through the test's name server or the system's."""
    imgs, refs = images(4)
    server = ServerProcess(SERVER_ARGS)
    router = None
    try:
        server.wait()
        with DnsServer({"enc.test": ["127.0.0.1"]}) as dns:
            spec = (f"dns://127.0.0.1:{dns.port}/enc.test:{server.port}" if how == "server"
                    else f"dns:///localhost:{server.port}")
            router = RouterProcess([spec], ["--resolve-every-s", "0.5"])
            router.wait()
            with Client(router.target) as cl:
                check(cl.preprocess(imgs), [0, 1, 2, 3], refs)
    finally:
        stop([server, router])
