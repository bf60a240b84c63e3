"""``python -m smg_fast.router`` in front of three real server processes on loopback.

Requests exact and in order with every transport (shm handles passed through), GetModelInfo for the
fleet, health, reflection and metrics, a SIGKILLed worker (with items in flight, retried) and a
SIGTERMed one mid-run with zero client-visible errors, a size limit answered once with its
retryable=0 trailer (the server's, and gRPC's own message limit), a member with another config
refused (listed first), a router drain, and bad flags refused with clear errors. docs/fleet.md lists
every flag."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from support.routing_common import (
    SERVER_ARGS,
    check,
    flat_png,
    png,
    preferring,
    start_servers,
    stop,
)

from smg_fast import load_processor
from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast._service.wire import RETRYABLE_KEY
from smg_fast.client import AsyncClient, Client, build_request, read_response
from smg_fast.testing.servers import RouterProcess, ServerProcess, free_port
from smg_fast.transport.tensors import shm_namespace

ARGS = [*SERVER_ARGS, "--max-output-mb", "64"]


def start_routed(n: int = 3, router_args: tuple[str, ...] = ()):
    servers = start_servers(n, ARGS)
    router = RouterProcess([s.target for s in servers], list(router_args))
    try:
        router.wait()
    except BaseException:
        stop([*servers, router])
        raise
    return servers, router


@pytest.fixture(scope="module")
def routed():
    metrics = free_port()
    servers, router = start_routed(router_args=("--metrics-port", str(metrics)))
    try:
        yield servers, router, metrics
    finally:
        stop([*servers, router])


def test_exact_in_order_every_transport(routed, images):
    servers, router, _ = routed
    imgs, refs = images(12)
    picks = [3, 0, 11, 7, 7, 1, 10, 9]
    with Client(router.target) as c:
        for transport in ("shm", "inline", "auto"):
            out = c.preprocess([imgs[k] for k in picks], transport=transport)
            check(out, picks, refs)
            want = "inline" if transport == "inline" else "shm"  # auto: the caller's host
            assert {it.transport for it in out.items} == {want}
        again = c.preprocess([imgs[k] for k in picks])
        assert all(it.cache_hit for it in again.items)  # same keys, same workers
        info = c.model_info()
    assert [m["name"] for m in info["models"]] == ["qwen2_vl"]
    assert info["default_model"] == "qwen2_vl" and info["shm_namespace"]
    assert info["pixel_cache_bytes"] == 3 * 64 * 2**20


def test_shm_handles_pass_through_unchanged(routed, images):
    """The router answers with the worker's own segment names: the pixels never crossed it."""
    servers, router, _ = routed
    imgs, _ = images(12)
    channel = grpc.insecure_channel(router.target)
    try:
        req = build_request(imgs[:4], transport="shm", namespace=shm_namespace())
        resp = pb_grpc.PreprocessorStub(channel).Preprocess(req, timeout=30)
    finally:
        channel.close()
    pids = {str(s.pid) for s in servers}
    names = [it.pixel_values.shm.name for it in resp.items]
    assert all(n.split("-")[2] in pids for n in names), names  # smg-fast-<pid>-...
    read_response(resp)  # maps and unlinks them


def test_health_reflection_metrics(routed, images):
    servers, router, metrics = routed
    imgs, _ = images(12)
    with Client(router.target) as c:
        assert c.health() == "SERVING"
        c.preprocess(imgs[:3])
    channel = grpc.insecure_channel(router.target)
    try:
        services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
    finally:
        channel.close()
    assert {"smg_fast.v1.Preprocessor", "grpc.health.v1.Health"} <= services
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10).read()
    text = text.decode()
    for s in servers:
        assert f'smg_fast_router_member_state{{state="serving",worker="{s.target}"}} 1.0' in text
    assert re.search(r'smg_fast_router_worker_items_total\{outcome="ok",worker="[^"]+"\} '
                     r'[1-9]', text)
    assert 'smg_fast_router_calls_total{status="OK"}' in text
    assert "smg_fast_router_in_flight_items{" in text
    assert "smg_fast_router_spills_total" in text and "smg_fast_router_refused_total" in text


def test_size_limit_answered_once_with_its_trailer(routed):
    _, router, metrics = routed
    channel = grpc.insecure_channel(router.target)
    try:
        req = build_request([png(40, 30, 1), png(3000, 3000, 7)], transport="inline")
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.PreprocessorStub(channel).Preprocess(req, timeout=30)
    finally:
        channel.close()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "item 1" in err.value.details()
    assert (RETRYABLE_KEY, "0") in tuple(err.value.trailing_metadata())
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10).read()
    assert b"smg_fast_router_retries_total{reason=" not in text  # tried on one worker only


@pytest.fixture(scope="module")
def mixed(routed):
    """A router in front of one worker of another config and two that agree.

    The router takes 2 MiB messages. The odd worker (its qwen2_vl is another config) is listed
    first; the two that agree are two of routed's workers, which keep serving. The two are the
    fleet, whichever answers first."""
    other = ServerProcess([*ARGS, "--model", "qwen2_vl=qwen2_5_vl"])
    router = None
    try:
        other.wait()
        servers = [other, *routed[0][:2]]
        metrics = free_port()
        router = RouterProcess([s.target for s in servers],
                               ["--max-message-mb", "2", "--metrics-port", str(metrics)])
        router.wait()
        yield servers, router, metrics
    finally:
        stop([other, router])


def test_member_with_other_fingerprint_is_refused_through_the_router(mixed, images):
    imgs, refs = images(12)
    servers, router, metrics = mixed
    other, same = servers[0], servers[1]
    with Client(same.target) as c:
        want = c.model_info()["models"][0]["config_fingerprint"]
    with Client(other.target) as c:
        assert c.model_info()["models"][0]["config_fingerprint"] != want
    with Client(router.target) as c:
        info = c.model_info()
    assert [(m["name"], m["config_fingerprint"]) for m in info["models"]] == [("qwen2_vl", want)]
    picks = list(range(10))
    channel = grpc.insecure_channel(router.target)
    try:
        req = build_request([imgs[k] for k in picks], transport="shm", namespace=shm_namespace())
        resp = pb_grpc.PreprocessorStub(channel).Preprocess(req, timeout=30)
    finally:
        channel.close()
    pids = {it.pixel_values.shm.name.split("-")[2] for it in resp.items}  # smg-fast-<pid>-...
    check(read_response(resp), picks, refs)  # (maps and unlinks them)
    assert pids and str(other.pid) not in pids
    assert _metric(metrics, "smg_fast_router_refused_total") == 1
    assert _metric(metrics, "smg_fast_router_member_state", state="refused",
                   worker=other.target) == 1


def test_message_over_the_size_limit_is_answered_once_through_the_router(mixed):
    """A 5 KiB PNG whose 26 MB answer is over the router's 2 MiB limit from its worker.

    GRPC's own RESOURCE_EXHAUSTED, no trailer, so the router answers at once with
    smg-fast-retryable: 0 (not tried on every worker, then answered 1)."""
    _, router, metrics = mixed
    channel = grpc.insecure_channel(router.target)
    try:
        req = build_request([flat_png(1200, 900)], transport="inline")
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.PreprocessorStub(channel).Preprocess(req, timeout=30)
    finally:
        channel.close()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "item 0" in err.value.details()
    assert (RETRYABLE_KEY, "0") in tuple(err.value.trailing_metadata())
    assert _metric(metrics, "smg_fast_router_retries_total") == 0


def _metric(port: int, name: str, **labels: str) -> float:
    """The sum of a metric's samples with these labels on the router's /metrics (0: none)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    total = 0.0
    for line in text.decode().splitlines():
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] == name and all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def test_worker_killed_and_drained_mid_run(images):
    """Concurrency 8 through the router (floor 64: every image on its first choice).

    After 6 requests the run pauses; worker 0 is stopped, a request of two new images whose first
    choice it is goes in, and once the router counts them in flight there worker 0 is SIGKILLed;
    worker 1 is SIGTERMed after 20: every request succeeds, exact and in order, and the router
    retried the killed worker's items."""
    imgs, refs = images(12)
    metrics = free_port()
    servers, router = start_routed(router_args=("--metrics-port", str(metrics), "--floor", "64"))
    try:
        import random

        rnd = random.Random(5)
        plans = [[rnd.randrange(len(imgs)) for _ in range(rnd.randint(1, 5))]
                 for _ in range(60)]
        queue = list(range(len(plans)))
        victim = servers[0]
        probe = preferring(victim.target, [s.target for s in servers], 2, start=1000,
                           size=(64, 48))
        proc = load_processor("qwen2_vl")
        probe_refs = [proc(im)["pixel_values"] for im in probe]
        done = active = 0
        go = asyncio.Event()
        seen = {}

        async def main():
            nonlocal done, active
            go.set()
            async with AsyncClient(router.target) as c:
                async def kill() -> None:
                    go.clear()  # the others finish what they run, then wait
                    while active:
                        await asyncio.sleep(0.01)
                    victim.proc.send_signal(signal.SIGSTOP)  # answers nothing from now on
                    task = asyncio.ensure_future(c.preprocess(probe, timeout=30))
                    for _ in range(1000):  # (a stopped worker's calls stay in flight)
                        seen["in_flight"] = await asyncio.to_thread(
                            _metric, metrics, "smg_fast_router_in_flight_items",
                            worker=victim.target)
                        if seen["in_flight"] >= 2:
                            break
                        await asyncio.sleep(0.01)
                    victim.kill()
                    go.set()
                    check(await task, [0, 1], probe_refs)

                async def worker():
                    nonlocal done, active
                    while queue:
                        await go.wait()
                        if not queue:
                            break
                        picks = plans[queue.pop()]
                        active += 1
                        try:
                            out = await c.preprocess([imgs[k] for k in picks], timeout=30)
                        finally:
                            active -= 1
                        check(out, picks, refs)
                        done += 1
                        if done == 6:
                            await kill()
                        if done == 20:
                            servers[1].proc.send_signal(signal.SIGTERM)

                await asyncio.gather(*(worker() for _ in range(8)))

        asyncio.run(main())
        assert done == 60 and seen["in_flight"] == 2
        assert servers[1].proc.wait(30) == 0
        assert _metric(metrics, "smg_fast_router_retries_total") >= 2
    finally:
        stop([*servers, router])


def test_router_drains_on_sigterm(routed, images):
    """A router of its own in front of one of routed's workers (which keeps serving)."""
    imgs, refs = images(12)
    router = RouterProcess([routed[0][0].target], ["--drain-timeout-s", "5"])
    try:
        router.wait()
        with Client(router.target) as c:
            check(c.preprocess(imgs[:2]), [0, 1], refs)
        router.proc.send_signal(signal.SIGTERM)
        assert router.proc.wait(60) == 0
    finally:
        stop([router])


@pytest.mark.parametrize("argv, message", [
    ([], "at least one --worker HOST:PORT"),
    (["--worker", "nohost"], "--worker must be HOST:PORT, got 'nohost'"),
    (["--worker", "a:1", "--worker", "a:1"], "given twice"),
    (["--worker", "a:1", "--load-factor", "0.5"], "--load-factor must be >= 1"),
    (["--worker", "a:1", "--keepalive-s", "0.5"], "--keepalive-s must be 0 (off) or >= 1"),
    (["--worker", "a:1", "--port", "70000"], "--port must be 0..65535"),
])
def test_bad_flags_fail_clearly(argv, message, capsys):
    from smg_fast.router.flags import config_from_args

    with pytest.raises(SystemExit) as info:
        config_from_args(argv, environ={})
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_flags_message_and_env(capsys):
    out = subprocess.run([sys.executable, "-m", "smg_fast.router", "--worker", "x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--worker must be HOST:PORT, got 'x'" in out.stderr
    from smg_fast.router.flags import config_from_args

    cfg = config_from_args(["--floor", "2"], environ={
        "SMG_FAST_ROUTER_WORKERS": "a:1, b:2", "SMG_FAST_ROUTER_FLOOR": "9",
        "SMG_FAST_ROUTER_LOAD_FACTOR": "1.5"})
    assert cfg.workers == ["a:1", "b:2"] and cfg.floor == 2 and cfg.load_factor == 1.5
    cfg = config_from_args(["--worker", "a:1", "--affinity-wait-s", "0"], environ={
        "SMG_FAST_ROUTER_AFFINITY_KEYS": "0"})
    assert (cfg.affinity_keys, cfg.affinity_wait_s) == (0, 0.0)  # memory and wait off
    for bad in (["--affinity-keys", "-1"], ["--affinity-wait-s", "-0.5"],
                ["--affinity-wait-s", "inf"]):
        with pytest.raises(SystemExit):
            config_from_args(["--worker", "a:1", *bad], environ={})
        assert bad[0] in capsys.readouterr().err


def test_help_and_readme_list_every_router_setting():
    """--help and docs/fleet.md list every router setting.

    Each is in --help and in the flag table of docs/fleet.md, with its environment variable."""
    from smg_fast.router.flags import OPTIONS, WORKERS_VAR

    out = subprocess.run([sys.executable, "-m", "smg_fast.router", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    help_words = set(re.sub(r"[\[\];,]", " ", out).split())
    fleet = (Path(__file__).parents[2] / "docs" / "fleet.md").read_text()
    section = fleet[fleet.index("## Router flags"):]
    section = section[:section.index("\n## ")]  # the table's section only
    table = [ln for ln in section.splitlines() if ln.startswith("| `--")]
    for flag, var in [(f, v) for f, v, _, _ in OPTIONS] + [("--worker", WORKERS_VAR)]:
        assert flag in help_words and var in help_words, (flag, var)
        row = [r for r in table if f"`{flag}`" in r or f"`{flag} " in r]
        assert row and f"`{var}`" in row[0], (flag, var, row)
