"""gRPC channel and server options.

The clients, the routing library and the service processes build their connections with them."""

from __future__ import annotations


def message_size_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """The largest message, both directions, of a channel or a server."""
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes)]


def keepalive_options(keepalive_s: float) -> list[tuple[str, int]]:
    """Channel options for HTTP/2 keepalive pings on a routed member's connection.

    Pings every keepalive_s (0: off), so a dead host's connection closes without waiting for TCP.
    The membership also sends a health Check every keepalive_s, which finds a hung process for
    sure."""
    if not keepalive_s:
        return []
    ms = int(keepalive_s * 1000)
    return [("grpc.keepalive_time_ms", ms), ("grpc.keepalive_timeout_ms", ms),
            ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]


def reconnect_options(max_s: float) -> list[tuple[str, int]]:
    """Channel options that retry a lost connection at least every max_s.

    gRPC's own backoff grows to 2 minutes (jittered), so a member restarted after a long outage
    would rejoin at a moment nobody can predict; the membership asks it again on its own
    schedule and needs the channel to try connecting when asked."""
    ms = int(max_s * 1000)
    return [("grpc.initial_reconnect_backoff_ms", min(ms, 100)),
            ("grpc.min_reconnect_backoff_ms", min(ms, 100)),
            ("grpc.max_reconnect_backoff_ms", ms)]
