"""Asking the test's name server on 127.0.0.1 (UDP and TCP) as discovery does.

EDNS0 on every UDP question, a truncated answer asked again over TCP, forged datagrams passed
over, failed tries made again (a bounded number), and a failed A or AAAA query failing the whole
resolution rather than giving the other family's addresses alone."""

from __future__ import annotations

import asyncio
import struct

import pytest
from support.dns_server import DnsServer

from smg_fast.routing import dns_wire
from smg_fast.routing.discovery import resolve
from smg_fast.routing.dns_message import AAAA, A, DnsError
from smg_fast.routing.dns_wire import ask

RECORDS = {"enc.test": ["127.0.0.2", "127.0.0.3", "::1"], "v4.test": ["127.0.0.2"]}
BOTH = ["127.0.0.2:80", "127.0.0.3:80", "[::1]:80"]


def _spec(dns: DnsServer, name: str = "enc.test") -> str:
    return f"dns://127.0.0.1:{dns.port}/{name}:80"


def test_questions_carry_edns0():
    """Each UDP question has one OPT record saying 4096 bytes (checked on the bytes received)."""
    with DnsServer(RECORDS) as dns:
        assert asyncio.run(resolve(_spec(dns))) == BOTH
        assert sorted(t for t, _ in dns.asked) == [A, AAAA]
        for _, msg in dns.asked:
            assert struct.unpack("!H", msg[10:12]) == (1,)  # arcount
            assert msg[-11:] == b"\x00" + struct.pack("!HHIH", 41, 4096, 0, 0)


def test_a_server_without_edns0_is_asked_again_without_it():
    with DnsServer(RECORDS) as dns:
        dns.no_edns = True
        assert asyncio.run(resolve(_spec(dns))) == BOTH
        assert [msg[10:12] for _, msg in dns.asked].count(b"\0\0") == 2


def test_a_truncated_answer_is_asked_again_over_tcp():
    with DnsServer(RECORDS) as dns:
        dns.truncate = True
        assert asyncio.run(resolve(_spec(dns))) == BOTH
        assert dns.tcp_queries == 2  # A and AAAA, each once over UDP (truncated), then TCP


@pytest.mark.parametrize("decoy", ["id", "question"])
def test_datagrams_that_answer_something_else_are_passed_over(decoy):
    """A forged answer (another id, or our id for another name) arrives first; ours is taken."""
    with DnsServer(RECORDS) as dns:
        dns.decoy = decoy
        assert asyncio.run(resolve(_spec(dns))) == BOTH
        assert dns.queries == 2  # the first try's answers, not a retry


def test_failed_tries_are_made_again():
    with DnsServer(RECORDS) as dns:
        dns.fail_first = dns_wire.TRIES - 1
        assert asyncio.run(ask(("127.0.0.1", dns.port), "enc.test", A)) == [
            "127.0.0.2", "127.0.0.3"]
        assert dns.queries == dns_wire.TRIES
        dns.fail[A] = "servfail"
        with pytest.raises(DnsError, match="rcode 2"):
            asyncio.run(ask(("127.0.0.1", dns.port), "enc.test", A))
        assert dns.queries == 2 * dns_wire.TRIES  # bounded


@pytest.mark.parametrize("how", ["servfail", "silent"])
@pytest.mark.parametrize("qtype", [A, AAAA])
def test_one_family_failing_fails_the_resolution(monkeypatch, how, qtype):
    """SERVFAIL or no answer for A or AAAA alone: DnsError, not the other family's addresses."""
    monkeypatch.setattr(dns_wire, "TIMEOUT_S", 0.2)
    with DnsServer(RECORDS) as dns:
        dns.fail[qtype] = how
        with pytest.raises(DnsError):
            asyncio.run(resolve(_spec(dns)))
        assert [t for t, _ in dns.asked].count(qtype) == dns_wire.TRIES


def test_one_family_without_records_is_no_failure():
    """NODATA for AAAA (a name with A records only) and NXDOMAIN for both."""
    with DnsServer(RECORDS) as dns:
        assert asyncio.run(resolve(_spec(dns, "v4.test"))) == ["127.0.0.2:80"]
        assert asyncio.run(resolve(_spec(dns, "missing.test"))) == []


def test_a_family_that_never_answers_leaves_the_other_and_a_failing_one_keeps_its_own(
        monkeypatch, caplog):
    """AAAA failing from the start gives the IPv4 members; failing later keeps its own.

    Both failing keeps everything; the failure is logged once."""
    from smg_fast.routing.discovery import Discovery

    async def changed(joined, left):
        pass

    monkeypatch.setattr(dns_wire, "TIMEOUT_S", 0.2)
    caplog.set_level("WARNING", "smg_fast.routing")
    with DnsServer(RECORDS) as dns:
        fresh = Discovery([_spec(dns)], 1.0, changed)
        dns.fail[AAAA] = "servfail"

        async def rounds(d, n):
            return [await d.read() for _ in range(n)]

        assert asyncio.run(rounds(fresh, 2)) == [BOTH[:2]] * 2
        assert sum("IPv6 family failed" in r.message for r in caplog.records) == 1
        dns.fail.clear()
        seen = Discovery([_spec(dns)], 1.0, changed)
        assert asyncio.run(seen.read()) == BOTH
        dns.fail[AAAA] = "silent"
        dns.set("enc.test", ["127.0.0.2", "::1"])  # A changes while AAAA cannot be read
        assert asyncio.run(seen.read()) == ["127.0.0.2:80", "[::1]:80"]
        dns.fail[A] = "servfail"
        assert asyncio.run(seen.read()) == ["127.0.0.2:80", "[::1]:80"]
