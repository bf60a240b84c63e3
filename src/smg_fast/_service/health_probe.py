"""A container's health check: ``python -m smg_fast._service.health_probe``.

Asks a server's (or router's) ``grpc.health.v1`` Check on this host and exits 0 when it answers
SERVING, 1 otherwise (NOT_SERVING while it starts or drains, no answer, an error), with one line
on stderr saying which. The port defaults to SMG_FAST_PORT (a server's), else 50051; the router's
image passes ``--port`` (or sets SMG_FAST_HEALTH_PORT). Kubernetes asks the same service through
its own gRPC probes and needs none of this."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def probe(target: str, service: str = "", timeout: float = 3.0) -> str:
    """The health status name target answers for service (SERVING, NOT_SERVING, ...).

    Raises grpc.RpcError when it does not answer."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        resp = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 when the service answers SERVING, else 1."""
    env = os.environ
    ap = argparse.ArgumentParser(prog="python -m smg_fast._service.health_probe",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=int(
        env.get("SMG_FAST_HEALTH_PORT") or env.get("SMG_FAST_PORT") or 50051))
    ap.add_argument("--service", default="", help="the health service name ('' = the process)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    ns = ap.parse_args(argv)
    host = f"[{ns.host}]" if ":" in ns.host and not ns.host.startswith("[") else ns.host
    target = f"{host}:{ns.port}"
    try:
        status = probe(target, ns.service, ns.timeout)
    except Exception as exc:  # grpc.RpcError and what a bad address raises: unhealthy
        code = getattr(exc, "code", None)
        print(f"{target}: no answer ({code().name if callable(code) else exc})", file=sys.stderr)
        return 1
    print(f"{target}: {status}", file=sys.stderr)
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
