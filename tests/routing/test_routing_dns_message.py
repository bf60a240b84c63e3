"""DNS messages read back from hand-built bytes: what is taken, and each malformed shape refused.

The packets are put together here byte by byte (RFC 1035), not with the module under test, except
for the queries whose EDNS0 record is checked."""

from __future__ import annotations

import struct

import pytest

from smg_fast.routing.dns_message import (
    AAAA,
    MAX_JUMPS,
    SRV,
    A,
    DnsMismatch,
    DnsParseError,
    DnsRcode,
    DnsTruncated,
    Srv,
    parse,
    query,
    read_name,
)

ID = 0x1234
ENC = b"\x03enc\x04test\x00"  # enc.test, at offset 12 of every message below
QUESTION_A = ENC + struct.pack("!HH", A, 1)


def header(ident: int = ID, flags: int = 0x8180, qd: int = 1, an: int = 0) -> bytes:
    return struct.pack("!HHHHHH", ident, flags, qd, an, 0, 0)


def record(owner: bytes, rtype: int, data: bytes, rclass: int = 1) -> bytes:
    return owner + struct.pack("!HHIH", rtype, rclass, 30, len(data)) + data


def answer(*records: bytes, flags: int = 0x8180, question: bytes = QUESTION_A,
           ident: int = ID) -> bytes:
    return header(ident, flags, 1, len(records)) + question + b"".join(records)


def test_addresses_are_read():
    """A records behind a pointer to the question; a CNAME on the way is passed over."""
    msg = answer(record(b"\xc0\x0c", 5, b"\x03web\xc0\x10"),  # enc.test CNAME web.test
                 record(b"\x03web\xc0\x10", A, bytes([10, 0, 0, 7])),
                 record(b"\xc0\x0c", A, bytes([10, 0, 0, 8])))
    assert parse(msg, ID, "enc.test", A) == ["10.0.0.7", "10.0.0.8"]
    v6 = answer(record(b"\xc0\x0c", AAAA, bytes(15) + b"\x07"),
                question=ENC + struct.pack("!HH", AAAA, 1))
    assert parse(v6, ID, "enc.test.", AAAA) == ["::7"]


def test_the_question_is_compared_without_case():
    msg = answer(record(b"\xc0\x0c", A, bytes([10, 0, 0, 7])),
                 question=b"\x03ENC\x04Test\x00" + struct.pack("!HH", A, 1))
    assert parse(msg, ID, "enc.TEST", A) == ["10.0.0.7"]


def test_no_records_and_error_codes():
    assert parse(answer(flags=0x8183), ID, "enc.test", A) == []  # NXDOMAIN
    assert parse(answer(), ID, "enc.test", A) == []  # no record of the type
    with pytest.raises(DnsRcode) as err:
        parse(answer(flags=0x8182), ID, "enc.test", A)  # SERVFAIL
    assert err.value.rcode == 2
    with pytest.raises(DnsTruncated):
        parse(answer(flags=0x8380), ID, "enc.test", A)
    with pytest.raises(DnsRcode) as err:  # FORMERR with the header alone, as old servers answer
        parse(header(flags=0x8181, qd=0), ID, "enc.test", A)
    assert err.value.rcode == 1


@pytest.mark.parametrize("msg", [
    answer(ident=ID ^ 1),  # another id
    answer(flags=0x0180),  # a query, not a response
    header(qd=0),  # no question
    header(qd=2) + QUESTION_A * 2,
    answer(question=b"\x05other\x04test\x00" + struct.pack("!HH", A, 1)),  # another name
    answer(question=ENC + struct.pack("!HH", AAAA, 1)),  # another type
    answer(question=ENC + struct.pack("!HH", A, 3)),  # another class
], ids=["id", "not-a-response", "no-question", "two-questions", "name", "type", "class"])
def test_an_answer_to_another_question_is_refused(msg):
    with pytest.raises(DnsMismatch):
        parse(msg, ID, "enc.test", A)


def test_a_pointer_loop_is_refused():
    """A name that points at itself, and two that point at each other."""
    itself = header() + b"\xc0\x0c" + struct.pack("!HH", A, 1)
    with pytest.raises(DnsParseError, match="compression pointers"):
        parse(itself, ID, "enc.test", A)
    pair = header() + b"\x01a\xc0\x10" + b"\x01b\xc0\x0c"  # 12 -> a, 16 -> b, back to 12
    with pytest.raises(DnsParseError, match="compression pointers"):
        read_name(pair, 12)


def _chain(n: int) -> bytes:
    """A root name at 12, then n pointers, each to the one before (the first to 12)."""
    msg = header() + b"\x00"
    for k in range(n):
        msg += struct.pack("!H", 0xC000 | (12 if k == 0 else 13 + 2 * (k - 1)))
    return msg


def test_a_long_pointer_chain_is_refused():
    """MAX_JUMPS pointers are followed, one more is not."""
    ok = _chain(MAX_JUMPS)
    assert read_name(ok, len(ok) - 2) == (b"", len(ok))
    bad = _chain(MAX_JUMPS + 1)
    with pytest.raises(DnsParseError, match="compression pointers"):
        read_name(bad, len(bad) - 2)


@pytest.mark.parametrize("name, match", [
    (b"\xc0\xff", "past the end"),  # a pointer beyond the message
    (b"\xc0", "cut off"),  # half a pointer
    (b"\x40" + b"x" * 64 + b"\x00", "label type"),  # a 64-byte label
    (b"\x80\x00", "label type"),
    (b"\x05ab", "past the end"),  # a label longer than what is left
    (b"\x03enc", "past the end"),  # no root label
    (b"\x3f" + b"x" * 63 + b"\x3f" + b"x" * 63 + b"\x3f" + b"x" * 63 + b"\x3f" + b"x" * 63
     + b"\x00", "over 255"),
], ids=["pointer-past-end", "half-pointer", "label-64", "label-type-80", "label-past-end",
        "no-root", "name-256"])
def test_malformed_names_are_refused(name, match):
    msg = header() + name
    with pytest.raises(DnsParseError, match=match):
        parse(msg + (struct.pack("!HH", A, 1) if name.endswith(b"\x00") else b""), ID,
              "enc.test", A)


def test_a_name_of_255_bytes_is_read():
    labels = b"\x3f" + b"x" * 63 + b"\x3f" + b"x" * 63 + b"\x3f" + b"x" * 63 + b"\x3d" + b"x" * 61
    name, end = read_name(header() + labels + b"\x00", 12)
    assert len(labels) + 1 == 255 and end == 12 + 255 and len(name) == 253


@pytest.mark.parametrize("tail", [
    struct.pack("!HHI", A, 1, 30),  # the record's fixed part cut off
    struct.pack("!HHIH", A, 1, 30, 4) + b"\x0a\x00",  # its data cut off
    struct.pack("!HHIH", A, 1, 30, 5) + b"\x0a\x00\x00\x07\x00",  # an A of 5 bytes
], ids=["fixed-part", "data", "a-of-5"])
def test_malformed_records_are_refused(tail):
    with pytest.raises(DnsParseError):
        parse(header(an=1) + QUESTION_A + b"\xc0\x0c" + tail, ID, "enc.test", A)


def test_queries_carry_edns0():
    """One OPT record (root owner, type 41) saying 4096 bytes over UDP, unless asked without."""
    q = query("enc.test", A, ID)
    assert struct.unpack("!HHHHHH", q[:12]) == (ID, 0x0100, 1, 0, 0, 1)
    assert q[12:12 + len(QUESTION_A)] == QUESTION_A
    assert q[12 + len(QUESTION_A):] == b"\x00" + struct.pack("!HHIH", 41, 4096, 0, 0)
    plain = query("enc.test", A, ID, edns=False)
    assert plain == struct.pack("!HHHHHH", ID, 0x0100, 1, 0, 0, 0) + QUESTION_A


SRV_NAME = b"\x05_grpc\x04_tcp\x03enc\x04test\x00"  # _grpc._tcp.enc.test, at offset 12
QUESTION_SRV = SRV_NAME + struct.pack("!HH", SRV, 1)
TARGET_AT = 12 + len(QUESTION_SRV) + 2 + 10 + 6  # the first record's target: after its owner
# (a pointer), its fixed part and its priority, weight and port


def srv_data(priority: int, weight: int, port: int, target: bytes) -> bytes:
    return struct.pack("!HHH", priority, weight, port) + target


def test_srv_records_are_read():
    """Targets written out, and one behind a pointer into the question (enc.test at 23); "."."""
    msg = answer(record(b"\xc0\x0c", SRV, srv_data(10, 5, 50051, b"\x01a\x03enc\x04test\x00")),
                 record(b"\xc0\x0c", SRV, srv_data(20, 0, 50052, b"\x01b\xc0\x17")),
                 record(b"\xc0\x0c", SRV, srv_data(0, 0, 0, b"\x00")),
                 record(b"\xc0\x0c", A, bytes([10, 0, 0, 9])),  # another type: passed over
                 question=QUESTION_SRV)
    assert parse(msg, ID, "_grpc._tcp.enc.test", SRV) == [
        Srv(10, 5, 50051, "a.enc.test"), Srv(20, 0, 50052, "b.enc.test"), Srv(0, 0, 0, "")]


@pytest.mark.parametrize("data, match", [
    (struct.pack("!HHH", 1, 1, 80), "SRV record of 6 bytes"),  # no target at all
    (srv_data(1, 1, 80, b"\x01a\x03enc"), "past the end"),  # the name runs past its record
    (srv_data(1, 1, 80, b"\x01a\x00\x00"), "does not end"),  # a byte after the target
    (srv_data(1, 1, 80, struct.pack("!H", 0xC000 | TARGET_AT)), "compression pointers"),
], ids=["no-target", "target-past-record", "trailing-byte", "pointer-loop"])
def test_malformed_srv_records_are_refused(data, match):
    msg = answer(record(b"\xc0\x0c", SRV, data), question=QUESTION_SRV)
    with pytest.raises(DnsParseError, match=match):
        parse(msg, ID, "_grpc._tcp.enc.test", SRV)


def test_a_record_whose_target_is_not_a_host_name_is_dropped_alone():
    """A well-formed name that is no host name (a space, non-ASCII) drops its record only."""
    msg = answer(record(b"\xc0\x0c", SRV, srv_data(1, 1, 80, b"\x03a b\x00")),
                 record(b"\xc0\x0c", SRV, srv_data(1, 1, 81, b"\x02\xff\xfe\x00")),
                 record(b"\xc0\x0c", SRV, srv_data(1, 1, 82, b"\x01a\x03enc\x04test\x00")),
                 question=QUESTION_SRV)
    assert parse(msg, ID, "_grpc._tcp.enc.test", SRV) == [Srv(1, 1, 82, "a.enc.test")]


def test_an_srv_target_cannot_point_past_its_record():
    """A target whose pointer leads to bytes after its own record is refused, not read."""
    later = record(b"\xc0\x0c", A, b"\x01x\x00\x00")  # its data would read as the name "x"
    x_at = TARGET_AT + 2 + 2 + 10  # past the SRV record (its 2-byte target), the A's owner and
    msg = answer(record(b"\xc0\x0c", SRV, srv_data(1, 1, 80, struct.pack("!H", 0xC000 | x_at))),
                 later, question=QUESTION_SRV)  # fixed part
    assert msg[x_at:x_at + 3] == b"\x01x\x00"
    with pytest.raises(DnsParseError, match="past the end"):
        parse(msg, ID, "_grpc._tcp.enc.test", SRV)
