"""Members from SRV records: ``dns+srv://SERVER/NAME`` and ``dns+srv:///NAME``.

Asked of the test's name server on 127.0.0.1: each target's A and AAAA addresses at its record's
port, the lowest priority with addresses (higher ones only as fallback), "." and repeats dropped,
a truncated answer asked again over TCP, the system's name servers read from resolv.conf in turn;
a failed SRV question keeps the source's members and a target's failed family its own; a fleet
and the router process follow the records with real servers on loopback."""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request

import pytest
from support.dns_server import DnsServer
from support.routing_common import SERVER_ARGS, check, stop

from smg_fast.client import Client
from smg_fast.routing import AsyncRoutedClient, dns_srv, dns_wire
from smg_fast.routing.checks import check_spec, parse_srv
from smg_fast.routing.discovery import Discovery, resolve
from smg_fast.routing.dns_message import AAAA, SRV, DnsError
from smg_fast.testing.servers import RouterProcess, ServerProcess, free_port

NAME = "_grpc._tcp.enc.test"
ADDRESSES = {"a.enc.test": ["127.0.0.2"], "b.enc.test": ["127.0.0.3", "::1"],
             "c.enc.test": ["127.0.0.4"], "empty.enc.test": []}


def _at(dns: DnsServer, name: str = NAME) -> str:
    return f"dns+srv://127.0.0.1:{dns.port}/{name}"


async def _nothing(joined, left):
    pass


def test_spec_forms():
    assert parse_srv("dns+srv:///_grpc._tcp.enc.test") == (None, "_grpc._tcp.enc.test")
    assert parse_srv("dns+srv://10.0.0.10/x.test.") == (("10.0.0.10", 53), "x.test.")
    assert parse_srv("dns+srv://[::1]:5353/x.test") == (("::1", 5353), "x.test")
    for bad in ("dns+srv:///", "dns+srv:///x.test:80", "dns+srv://x.test", "dns+srv:///a/b",
                "dns+srv://:99999/x.test"):
        with pytest.raises(ValueError):
            check_spec(bad)
    assert check_spec("dns+srv:///x.test") == "dns+srv:///x.test"


def test_members_are_the_lowest_priority_with_addresses():
    srv = {NAME: [(20, 0, 7002, "c.enc.test"), (10, 5, 7001, "b.enc.test"),
                  (10, 1, 7000, "A.enc.test."), (10, 9, 7000, "a.enc.test"),  # a repeat
                  (10, 1, 7003, "a.enc.test")],  # the same target at another port
           "fallback.test": [(1, 0, 7000, "empty.enc.test"), (1, 0, 7001, "missing.enc.test"),
                             (5, 0, 7002, "c.enc.test"), (9, 0, 7003, "a.enc.test")],
           "none.test": [(0, 0, 0, ".")]}
    with DnsServer(ADDRESSES, srv=srv) as dns:
        assert asyncio.run(resolve(_at(dns))) == [
            "127.0.0.2:7000", "127.0.0.2:7003", "127.0.0.3:7001", "[::1]:7001"]
        # no target of priority 1 has an address: the next priority gives the members
        assert asyncio.run(resolve(_at(dns, "fallback.test"))) == ["127.0.0.4:7002"]
        assert asyncio.run(resolve(_at(dns, "none.test"))) == []  # "." : no service
        assert asyncio.run(resolve(_at(dns, "missing.test"))) == []  # NXDOMAIN
        assert asyncio.run(resolve(_at(dns, "a.enc.test"))) == []  # no SRV records
        asked = [t for t, _ in dns.asked]
        assert asked.count(SRV) == 5


def test_targets_are_capped(caplog):
    srv = {NAME: [(10, 0, 7000 + i, "a.enc.test") for i in range(dns_srv.MAX_TARGETS + 20)]}
    caplog.set_level(logging.WARNING, "smg_fast.routing")
    with DnsServer(ADDRESSES, srv=srv) as dns:
        got = asyncio.run(resolve(_at(dns)))
    assert len(got) == dns_srv.MAX_TARGETS
    assert "taking the first 256" in caplog.text


def test_members_one_source_names_are_capped(caplog):
    """Many targets of many addresses each: at most MAX_MEMBERS members (the first, sorted)."""
    per = 200
    many = {f"t{i}.enc.test": [f"127.{i + 1}.{j // 250}.{1 + j % 250}" for j in range(per)]
            for i in range(6)}
    srv = {NAME: [(10, 0, 7000 + i, f"t{i}.enc.test") for i in range(6)]}
    caplog.set_level(logging.WARNING, "smg_fast.routing")
    with DnsServer(many, srv=srv) as dns:
        got = asyncio.run(resolve(_at(dns)))
    every = sorted(f"{a}:{7000 + i}" for i in range(6) for a in many[f"t{i}.enc.test"])
    assert len(every) == 6 * per > dns_srv.MAX_MEMBERS
    assert got == every[:dns_srv.MAX_MEMBERS]
    assert f"names {6 * per} members; taking the first {dns_srv.MAX_MEMBERS}" in caplog.text


def test_port_zero_and_bad_targets_are_dropped_alone():
    """A record of port 0 names nothing, nor does a target that is not a host name; the rest do."""
    srv = {NAME: [(10, 0, 0, "a.enc.test"), (10, 0, 7001, "bad!name.enc.test"),
                  (10, 0, 7002, "c.enc.test")]}
    with DnsServer(ADDRESSES, srv=srv) as dns:
        assert asyncio.run(resolve(_at(dns))) == ["127.0.0.4:7002"]


def test_a_record_naming_the_router_itself_is_refused(images):
    """An SRV record leading back to the router: that member is refused, never routed to.

    Each request is placed on the real server once (the router answers exactly as many calls as
    the client made: none looped back through it)."""
    imgs, refs = images(6)
    server = ServerProcess(SERVER_ARGS)
    router = None
    rport, metrics = free_port(), free_port()
    try:
        server.wait()
        with DnsServer({"router.enc.test": ["127.0.0.1"], "m.enc.test": ["127.0.0.1"]},
                       srv={NAME: [(0, 0, rport, "router.enc.test"),
                                   (0, 0, server.port, "m.enc.test")]}) as dns:
            router = RouterProcess([_at(dns)], ["--resolve-every-s", "0.5",
                                                "--metrics-port", str(metrics)], port=rport)
            router.wait()
            text = ""
            deadline = time.monotonic() + 30
            refused = ("smg_fast_router_member_state{state=\"refused\","
                       f"worker=\"127.0.0.1:{rport}\"}} 1.0")
            while refused not in text:
                assert time.monotonic() < deadline, text
                time.sleep(0.2)
                text = _metrics(metrics)
            with Client(router.target) as cl:
                for i in range(6):
                    check(cl.preprocess([imgs[i]]), [i], refs)
            text = _metrics(metrics)
            assert 'smg_fast_router_calls_total{status="OK"} 6.0' in text, text
    finally:
        stop([server, router])


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def test_per_member_log_lines_are_budgeted(caplog):
    """A burst of lines per window goes through; the rest are counted, then summarized."""
    from smg_fast.routing.log_budget import LogBudget

    logger = logging.getLogger("smg_fast.routing.test_budget")
    caplog.set_level(logging.INFO, logger.name)
    budget = LogBudget(logger, burst=3, window_s=0.2)
    let = [budget.log(logging.INFO, "member %s: down", f"m{i}") for i in range(50)]
    assert let == [True] * 3 + [False] * 47
    assert caplog.text.count(": down") == 3
    time.sleep(0.25)
    assert budget.log(logging.INFO, "member %s: down", "m50")
    assert "(47 member log line(s) left out in the last 0.2 s)" in caplog.text


def test_a_truncated_srv_answer_is_asked_again_over_tcp():
    srv = {NAME: [(10, 0, 7000, "a.enc.test"), (10, 0, 7001, "b.enc.test")]}
    with DnsServer(ADDRESSES, srv=srv) as dns:
        dns.truncate = True
        assert asyncio.run(resolve(_at(dns))) == [
            "127.0.0.2:7000", "127.0.0.3:7001", "[::1]:7001"]
        assert dns.tcp_queries >= 3  # the SRV question and each target's A and AAAA too


def test_the_system_name_servers_are_asked_in_turn(tmp_path, monkeypatch):
    """resolv.conf's first name server does not answer; the second does.

    The targets resolve through the system's resolver (localhost)."""
    monkeypatch.setattr(dns_wire, "TIMEOUT_S", 0.2)
    conf = tmp_path / "resolv.conf"
    with DnsServer({}, srv={NAME: [(0, 0, 7000, "localhost")]}) as dns:
        conf.write_text("# test\nsearch example.test\nnameserver 127.0.0.9 ; no one\n"
                        "nameserver 127.0.0.1\noptions ndots:5\n")
        monkeypatch.setattr(dns_srv, "RESOLV_CONF", str(conf))
        monkeypatch.setattr(dns_srv, "NAME_SERVER_PORT", dns.port)
        assert dns_srv.name_servers(str(conf)) == [("127.0.0.9", dns.port),
                                                   ("127.0.0.1", dns.port)]
        got = asyncio.run(resolve(f"dns+srv:///{NAME}"))
        assert "127.0.0.1:7000" in got
        assert [t for t, _ in dns.asked] == [SRV]  # the targets did not come here
    assert dns_srv.name_servers(str(tmp_path / "absent")) == [("127.0.0.1", dns.port)]


def test_failures_keep_what_was_found(monkeypatch, caplog):
    """The SRV question failing keeps every member; a target's AAAA failing keeps its own."""
    monkeypatch.setattr(dns_wire, "TIMEOUT_S", 0.2)
    caplog.set_level(logging.WARNING, "smg_fast.routing")
    srv = {NAME: [(10, 0, 7000, "a.enc.test"), (10, 0, 7001, "b.enc.test")]}
    both = ["127.0.0.2:7000", "127.0.0.3:7001", "[::1]:7001"]
    with DnsServer(ADDRESSES, srv=srv) as dns:
        seen = Discovery([_at(dns)], 1.0, _nothing)

        async def rounds() -> list[list[str]]:
            out = [await seen.read()]
            dns.fail[SRV] = "servfail"
            out.append(await seen.read())
            with pytest.raises(DnsError):
                await resolve(_at(dns))  # (the strict form says so)
            dns.fail = {AAAA: "silent"}
            dns.set("b.enc.test", ["127.0.0.5", "::1"])  # A changes while AAAA cannot be read
            out.append(await seen.read())
            dns.fail = {}
            dns.set_srv(NAME, [(10, 0, 7000, "a.enc.test")])
            out.append(await seen.read())
            return out

        assert asyncio.run(rounds()) == [
            both, both, ["127.0.0.2:7000", "127.0.0.5:7001", "[::1]:7001"], ["127.0.0.2:7000"]]
    assert "cannot read" in caplog.text and "keeping its 3 member(s)" in caplog.text
    assert "b.enc.test: IPv6 family failed" in caplog.text


def test_a_fleet_follows_srv_records(images):
    """Members on one address at the ports the records give; they join, fall back and leave."""
    imgs, refs = images(8)
    servers = [ServerProcess(SERVER_ARGS) for _ in range(3)]
    try:
        for s in servers:
            s.wait()
        p1, p2, p3 = (s.port for s in servers)
        a, b, c = (f"127.0.0.1:{p}" for p in (p1, p2, p3))
        with DnsServer({"m.enc.test": ["127.0.0.1"]},
                       srv={NAME: [(10, 0, p1, "m.enc.test")]}) as dns:

            async def main() -> None:
                async with AsyncRoutedClient(_at(dns), resolve_every_s=0.2, floor=1) as fleet:
                    check(await fleet.preprocess(imgs), list(range(8)), refs)
                    assert set(fleet.stats()["members"]) == {a}
                    dns.set_srv(NAME, [(10, 0, p1, "m.enc.test"), (10, 0, p2, "m.enc.test"),
                                       (30, 0, p3, "m.enc.test")])
                    await _until(lambda: _serving(fleet) == {a, b}, "b did not join")
                    out = await fleet.preprocess(imgs)
                    check(out, list(range(8)), refs)
                    assert {it.worker for it in out.items} == {a, b}
                    # priority 10's target loses its addresses: the fallback gives the members
                    dns.set("m.enc.test", [])
                    dns.set("n.enc.test", ["127.0.0.1"])
                    dns.set_srv(NAME, [(10, 0, p1, "m.enc.test"), (10, 0, p2, "m.enc.test"),
                                       (30, 0, p3, "n.enc.test")])
                    await _until(lambda: set(fleet.stats()["members"]) == _serving(fleet) == {c},
                                 "the fallback did not take over")
                    out = await fleet.preprocess(imgs)
                    check(out, list(range(8)), refs)
                    assert {it.worker for it in out.items} == {c}

            asyncio.run(main())
    finally:
        stop(servers)


def test_router_follows_srv_records(images):
    imgs, refs = images(4)
    server = ServerProcess(SERVER_ARGS)
    router = None
    try:
        server.wait()
        with DnsServer({"m.enc.test": ["127.0.0.1"]},
                       srv={NAME: [(0, 0, server.port, "m.enc.test")]}) as dns:
            router = RouterProcess([_at(dns)], ["--resolve-every-s", "0.5"])
            router.wait()
            with Client(router.target) as cl:
                check(cl.preprocess(imgs), [0, 1, 2, 3], refs)
    finally:
        stop([server, router])


def test_router_help_names_srv():
    from smg_fast.router.flags import build_parser

    text = " ".join(build_parser({}).format_help().split())
    assert "dns+srv:///NAME" in text and "dns+srv://SERVER[:PORT]/NAME" in text
    assert "lowest priority" in text and "weights unused" in text


async def _until(cond, what: str, limit: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not cond():
        assert loop.time() < end, what
        await asyncio.sleep(0.02)


def _serving(fleet) -> set[str]:
    return {t for t, m in fleet.stats()["members"].items() if m["state"] == "serving"}


def test_what_is_kept_of_gone_targets_is_forgotten():
    """Pods come and go: the per-target memory holds only the targets the records lead to."""
    with DnsServer({f"p{i}.enc.test": [f"127.0.1.{i}"] for i in range(20)},
                   srv={NAME: [(0, 0, 7000, "p0.enc.test")]}) as dns:
        seen = Discovery([_at(dns)], 1.0, _nothing)

        async def rounds() -> list[str]:
            for i in range(20):
                dns.set_srv(NAME, [(0, 0, 7000, f"p{i}.enc.test"),
                                   (0, 0, 7000, f"p{(i + 1) % 20}.enc.test")])
                got = await seen.read()
            return got

        assert asyncio.run(rounds()) == ["127.0.1.0:7000", "127.0.1.19:7000"]
    assert sorted(k[1] for k in seen._families) == ["p0.enc.test", "p19.enc.test"]
