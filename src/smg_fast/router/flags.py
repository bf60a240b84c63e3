"""The router's command line (``python -m smg_fast.router``).

One source per setting, as the server's. Each is a CLI flag whose default comes from its
SMG_FAST_ROUTER_ environment variable, else the built-in default shown in ``--help``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

from .._service.env_flags import Option, add_env_options, env_list
from .config import RouterConfig

# (flag, env var, type, help); defaults come from RouterConfig.
OPTIONS: list[Option] = [
    ("--host", "SMG_FAST_ROUTER_HOST", str, "address to listen on (gRPC and metrics)"),
    ("--port", "SMG_FAST_ROUTER_PORT", int, "gRPC port (0 = any free port, logged at start)"),
    ("--load-factor", "SMG_FAST_ROUTER_LOAD_FACTOR", float,
     "a worker may hold ceil(load factor x (items in flight + 1) / workers) items before the "
     "next image goes to its next choice (>= 1); a video counts one item per MiB of its bytes"),
    ("--floor", "SMG_FAST_ROUTER_FLOOR", int,
     "a worker may always hold this many items in flight (light load never spills)"),
    ("--affinity-keys", "SMG_FAST_ROUTER_AFFINITY_KEYS", int,
     "how many recent images the router remembers the workers of: an image goes back to a "
     "worker that has its pixels while one is under the bound (0 = off: rendezvous order only)"),
    ("--affinity-wait-s", "SMG_FAST_ROUTER_AFFINITY_WAIT_S", float,
     "longest an image whose workers are all at the bound waits for one of them that will free "
     "a slot soon (fewer items wait for it than it has in flight; else it goes at once), and at "
     "most half the request's timeout, before "
     "it goes to a worker that computes it again (0 = never waits)"),
    ("--metrics-port", "SMG_FAST_ROUTER_METRICS_PORT", int,
     "Prometheus /metrics port (0 = off)"),
    ("--log-level", "SMG_FAST_ROUTER_LOG_LEVEL", str, "debug | info | warning | error"),
    ("--drain-timeout-s", "SMG_FAST_ROUTER_DRAIN_TIMEOUT_S", float,
     "on SIGTERM/SIGINT: how long requests in flight may still run (new ones get "
     "UNAVAILABLE); then they are cut with UNAVAILABLE"),
    ("--max-message-mb", "SMG_FAST_ROUTER_MAX_MESSAGE_MB", int,
     "largest gRPC message in MiB, both directions, to callers and to workers"),
    ("--request-timeout-s", "SMG_FAST_ROUTER_REQUEST_TIMEOUT_S", float,
     "deadline of a request whose caller set none (a caller's shorter one wins)"),
    ("--attempt-timeout-s", "SMG_FAST_ROUTER_ATTEMPT_TIMEOUT_S", float,
     "longest one worker may take for its part of a request; past it the items go to their "
     "next worker, and the worker counts as failed (toward ejection) only when it does not "
     "answer a health check either (0 = the request's whole deadline)"),
    ("--keepalive-s", "SMG_FAST_ROUTER_KEEPALIVE_S", float,
     "keepalive ping interval (and answer timeout) on each worker's connection: a hung worker "
     "is found within twice this (0 = off, else >= 1)"),
    ("--join-timeout-s", "SMG_FAST_ROUTER_JOIN_TIMEOUT_S", float,
     "at start: how long to wait for the workers' first answers before serving"),
    ("--eject-after", "SMG_FAST_ROUTER_EJECT_AFTER", int,
     "consecutive transport failures that eject a worker"),
    ("--eject-base-s", "SMG_FAST_ROUTER_EJECT_BASE_S", float,
     "first ejection's length; each repeat doubles it (at most 60 s), then one request probes"),
    ("--max-queued-requests", "SMG_FAST_ROUTER_MAX_QUEUED_REQUESTS", int,
     "requests routed at once; more get RESOURCE_EXHAUSTED at once (0 = auto: 1024)"),
    ("--max-queued-mb", "SMG_FAST_ROUTER_MAX_QUEUED_MB", int,
     "MiB of request messages routed at once; a lone request is always admitted (0 = auto: "
     "1/8 of physical memory, 64..1024 MiB)"),
    ("--max-receiving-per-connection", "SMG_FAST_ROUTER_MAX_RECEIVING_PER_CONNECTION", int,
     "Preprocess calls one connection may have reading their message at once; the next ones "
     "wait, in order, gRPC taking at most a stream window of each (as the server's)"),
    ("--max-receiving", "SMG_FAST_ROUTER_MAX_RECEIVING", int,
     "Preprocess calls all connections together may have reading their message at once (0 = "
     "auto: as many --max-message-mb messages as --max-queued-mb holds, at least "
     "--max-receiving-per-connection)"),
    ("--receive-timeout-s", "SMG_FAST_ROUTER_RECEIVE_TIMEOUT_S", float,
     "a Preprocess call whose message has not all arrived this long after the call began "
     "(waiting included) ends RESOURCE_EXHAUSTED"),
    ("--stream-window-kb", "SMG_FAST_ROUTER_STREAM_WINDOW_KB", int,
     "HTTP/2 window of a caller's stream: what one upload sends per round trip (raise it for "
     "callers over a WAN, at the cost of that much more memory per waiting call)"),
    ("--resolve-every-s", "SMG_FAST_ROUTER_RESOLVE_EVERY_S", float,
     "how often dns:, dns+srv: and file: workers are read again (and at once when a worker "
     "goes down)"),
    ("--hedge-percentile", "SMG_FAST_ROUTER_HEDGE_PERCENTILE", float,
     "a worker's part of a request that runs past this percentile of the worker's recent "
     "latencies (same model and size) is sent to the next worker too; the first answer wins "
     "(0 = never)"),
    ("--hedge-ratio", "SMG_FAST_ROUTER_HEDGE_RATIO", float,
     "hedges at most this share of the sub-calls (a hung worker's calls do not count)"),
]
WORKERS_VAR = "SMG_FAST_ROUTER_WORKERS"


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    ap = argparse.ArgumentParser(
        prog="python -m smg_fast.router",
        description="smg-fast router: serves smg_fast.v1.Preprocessor in front of a fleet of "
                    "smg-fast servers, placing each image on a worker by its content (cache "
                    "affinity) under a load bound, retrying only failed items elsewhere. "
                    "Handles (shm names, rdma descriptors) pass through unchanged. Every option "
                    "can also be set by the environment variable shown; the flag wins.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--worker", dest="workers", action="append", default=argparse.SUPPRESS,
                    metavar="TARGET",
                    help="an smg-fast server of the fleet, HOST:PORT, or where to find them: "
                         "dns:///NAME:PORT (every A/AAAA address of NAME, e.g. a Kubernetes "
                         "headless service), dns://SERVER[:PORT]/NAME:PORT (asking that name "
                         "server), dns+srv:///NAME or dns+srv://SERVER[:PORT]/NAME (NAME's SRV "
                         "records: each target's A/AAAA addresses at the record's port; the "
                         "lowest priority whose targets have addresses, others only as "
                         "fallback; weights unused; NAME fully qualified, e.g. "
                         "_grpc._tcp.enc.default.svc.cluster.local; dns+srv:/// asks the "
                         "nameservers of /etc/resolv.conf), "
                         "file:///PATH (a file of targets, one a line, watched) "
                         f"(repeatable; at least one) [env {WORKERS_VAR}, comma-separated]")
    add_env_options(ap, OPTIONS, RouterConfig(), env)
    ap.set_defaults(_env_workers=env_list(env, WORKERS_VAR))
    return ap


def config_from_args(argv: Sequence[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> RouterConfig:
    ap = build_parser(environ)
    ns = ap.parse_args(argv)
    workers = getattr(ns, "workers", None) or ns._env_workers
    names = [flag[2:].replace("-", "_") for flag, _, _, _ in OPTIONS]
    cfg = RouterConfig(workers=[w.strip() for w in workers],
                       **{n: getattr(ns, n) for n in names})
    cfg.log_level = cfg.log_level.lower()
    try:
        return cfg.validate()
    except ValueError as exc:
        ap.error(str(exc))
    raise AssertionError("unreachable")
