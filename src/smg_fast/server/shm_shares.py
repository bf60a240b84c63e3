"""Who a request's unread shm bytes are counted against (the registry's per-caller share).

A caller is its gRPC connection (``context.peer()``). A router (``python -m smg_fast.router``)
reaches each worker over one connection for all of its own callers, so there they would all
share one share and one caller hoarding unread segments would take the others' room. The router
therefore names its caller in the ``smg-fast-caller`` request metadata, and the server honours
that name only from peers whose address is a trusted router (``--trusted-router-peer``): such a
request is counted per (connection, named caller). Anyone else's claim is ignored (counted per
connection, as always), so an ordinary client cannot multiply its share by claiming names.
The trade-off: whoever can connect from a trusted address can claim as many names (shares) as
it likes; the total cap (``--shm-max-outstanding-mb``) still bounds them all together.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from .._service.wire import CALLER_KEY, MAX_CALLER_LEN

log = logging.getLogger("smg_fast.server")

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# How the share was chosen, for the refusal's wording.
CONNECTION = "connection"  # no claim: this connection's share
ROUTED = "routed"  # a trusted router's caller: that caller's share
UNTRUSTED = "untrusted"  # a claim from a peer that is not a trusted router: ignored


def parse_networks(specs: Iterable[str]) -> list[_Network]:
    """IP addresses or networks (``10.0.0.5``, ``10.0.0.0/24``, ``::1``).

    ValueError naming a bad one (host names are refused: a peer is matched by the address it
    connects from)."""
    out = []
    for spec in specs:
        try:
            out.append(ipaddress.ip_network(spec.strip().strip("[]"), strict=False))
        except ValueError:
            raise ValueError(f"--trusted-router-peer must be an IP address or network, got "
                             f"{spec!r}") from None
    return out


def peer_address(peer: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``).

    None for others (unix sockets). An IPv4-mapped IPv6 address is its IPv4 one."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        host = rest.rpartition(":")[0]
    elif kind == "ipv6":
        host = rest.rpartition(":")[0].strip("[]").split("%")[0]
    else:
        return None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip


class Callers:
    """Maps a call (its peer and metadata) to the key its shm share is counted under."""

    def __init__(self, trusted: Iterable[str] = ()) -> None:
        self.trusted = parse_networks(trusted)
        self._warned: set[str] = set()

    def trusts(self, peer: str) -> bool:
        ip = peer_address(peer)
        return ip is not None and any(ip in net for net in self.trusted)

    def identify(self, peer: str, metadata: Iterable[tuple[str, object]] | None
                 ) -> tuple[str, str]:
        """(share key, how it was chosen: CONNECTION, ROUTED or UNTRUSTED)."""
        claim = ""
        for key, value in metadata or ():
            if key == CALLER_KEY:
                claim = value.decode("ascii", "replace") if isinstance(value, bytes) \
                    else str(value)
                break
        if not claim:
            return peer, CONNECTION
        if not self.trusts(peer):
            self._warn(peer)
            return peer, UNTRUSTED
        return f"{peer} for {claim[:MAX_CALLER_LEN]}", ROUTED

    def _warn(self, peer: str) -> None:
        host = str(peer_address(peer) or peer)
        if host in self._warned or len(self._warned) >= 64:
            return
        self._warned.add(host)
        log.warning("%s sent %s metadata but is not a --trusted-router-peer: its requests share "
                    "one shm share per connection, whoever it forwards for", host, CALLER_KEY)


def rdma_caller(peer: str, key: str, share: str) -> str:
    """The key a call's RDMA slots count under (its shm share's ``key``, chosen as ``share``).

    A trusted router's named caller as for shm; anyone else by its address without the port, so
    the connections one host opens share one share of the arena."""
    if share == ROUTED:
        return key
    return f"host {peer_address(peer) or peer}"
