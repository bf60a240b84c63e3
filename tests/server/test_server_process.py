"""``python -m smg_fast.server`` as a real process.

Configuration from flags and environment, metrics, the client CLI, and SIGTERM with requests in
flight (drained, exact, nothing left in /dev/shm)."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast.client import Client  # noqa: E402
from smg_fast.server.config import ServerConfig  # noqa: E402
from smg_fast.server.flags import config_from_args  # noqa: E402
from smg_fast.testing.servers import ServerProcess, free_port  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def test_defaults_flags_and_env():
    cfg = config_from_args([], environ={})
    assert (cfg.host, cfg.port, cfg.models) == ("127.0.0.1", 50051, [("qwen2_vl", "qwen2_vl")])
    assert cfg.transport == "inline" and cfg.pixel_cache_mb == 0 and cfg.shm_min_bytes == 65536
    assert cfg.max_message_mb == 256 and cfg.metrics_port == 0
    env = {"SMG_MM_PIXEL_CACHE_MB": "128", "SMG_MM_TENSOR_TRANSPORT": "auto",
           "SMG_MM_SHM_MIN_BYTES": "1024", "SMG_FAST_PORT": "6000",
           "SMG_FAST_MODELS": "a=qwen3_vl,b=kimi_k25"}
    cfg = config_from_args([], environ=env)
    assert cfg.pixel_cache_mb == 128 and cfg.transport == "auto" and cfg.shm_min_bytes == 1024
    assert cfg.port == 6000 and cfg.models == [("a", "qwen3_vl"), ("b", "kimi_k25")]
    cfg = config_from_args(["--pixel-cache-mb", "7", "--model", "kimi_k25", "--port", "7"],
                           environ=env)  # the flag wins
    assert cfg.pixel_cache_mb == 7 and cfg.models == [("kimi_k25", "kimi_k25")] and cfg.port == 7


@pytest.mark.parametrize("argv, env", [
    (["--transport", "pigeon"], {}),
    (["--port", "70000"], {}),
    (["--workers", "0"], {}),
    (["--allowed-media-dir", "/no/such/dir"], {}),
    ([], {"SMG_MM_PIXEL_CACHE_MB": "lots"}),
    (["--model", "a=qwen2_vl", "--model", "a=kimi_k25"], {}),
])
def test_bad_configuration_exits(argv, env, capsys):
    with pytest.raises(SystemExit) as info:
        config_from_args(argv, environ=env)
    assert info.value.code == 2


def test_unknown_model_fails_to_start(start_server):
    with pytest.raises(ValueError, match="unknown processor"):
        start_server(models=[("x", "llava")])


def test_help_and_readme_list_every_setting():
    """--help and docs/service.md list every server setting.

    Each is in --help and in the flag table of docs/service.md, with its environment variable (and
    smg's name for it, where it has one)."""
    from pathlib import Path

    from smg_fast.server.flags import _OPTIONS, ALIASES

    out = subprocess.run([sys.executable, "-m", "smg_fast.server", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    help_words = set(re.sub(r"[\[\];,]", " ", out).split())
    service = (Path(__file__).parents[2] / "docs" / "service.md").read_text()
    flags = service[service.index("## Flags"):]
    flags = flags[:flags.index("\n## ")]  # the table's section only
    table = {ln.split("|")[1] + ln.split("|")[2] for ln in flags.splitlines()
             if ln.startswith("| `--")}
    names = [(flag, var) for flag, var, _, _ in _OPTIONS]
    names += [("--model", "SMG_FAST_MODELS"), ("--allowed-media-dir",
                                               "SMG_FAST_ALLOWED_MEDIA_DIRS"),
              ("--trusted-router-peer", "SMG_FAST_TRUSTED_ROUTER_PEERS")]
    for flag, var in names:
        assert flag in help_words and var in help_words, (flag, var)
        row = [r for r in table if f"`{flag}`" in r or f"`{flag} " in r]
        assert row and f"`{var}`" in row[0], (flag, var, row)
        alias = ALIASES.get(var)
        if alias:
            assert alias[0] in help_words and f"`{alias[0]}`" in row[0], alias


def test_smg_alias_names_and_units():
    cfg = config_from_args([], environ={"SMG_RDMA_SLOT_BYTES": str(48 << 20),
                                        "SMG_MM_TENSOR_TRANSPORT": "shm"})
    assert cfg.rdma_slot_bytes == 48 << 20 and cfg.transport == "shm"
    # the SMG_FAST_ name wins over smg's, and the flag over both; the MiB variable is in MiB
    cfg = config_from_args([], environ={"SMG_FAST_RDMA_SLOT_MB": "16",
                                        "SMG_RDMA_SLOT_BYTES": str(48 << 20),
                                        "SMG_FAST_TRANSPORT": "auto",
                                        "SMG_MM_TENSOR_TRANSPORT": "shm"})
    assert cfg.rdma_slot_bytes == 16 << 20 and cfg.transport == "auto"
    cfg = config_from_args(["--rdma-slot-mb", "8"], environ={"SMG_FAST_RDMA_SLOT_MB": "16"})
    assert cfg.rdma_slot_bytes == 8 << 20


def test_process_end_to_end_and_sigterm_drain(real_images, small_jpegs, ours, track_pid,
                                              tmp_path):
    port, metrics_port = free_port(), free_port()
    env = dict(os.environ, SMG_FAST_PORT=str(port), SMG_MM_PIXEL_CACHE_MB="64",
               SMG_MM_TENSOR_TRANSPORT="shm", SMG_FAST_METRICS_PORT=str(metrics_port),
               SMG_FAST_WORKERS="2")
    srv = ServerProcess(["--host", "127.0.0.1"], env=env, port=port, address_flags=False)
    proc, target = srv.proc, srv.target
    track_pid(srv.pid)
    try:
        srv.wait()
        with Client(target, timeout=60) as c:
            info = c.model_info()
            assert info["default_transport"] == "shm" and info["pixel_cache_bytes"] == 64 << 20
            out = c.preprocess(small_jpegs["rocket"], transport="")  # server default: shm
            assert out.items[0].transport == "shm"

        # the client CLI, verifying against the in-process processor
        img = tmp_path / "chelsea.jpg"
        img.write_bytes(small_jpegs["chelsea"])
        cli = subprocess.run([sys.executable, "-m", "smg_fast.client", str(img), "--target",
                              target, "--verify", "--repeat", "2"],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        lines = cli.stdout.strip().splitlines()
        assert len(lines) == 2 and all("identical to in-process" in ln for ln in lines)
        assert "cache_hit false" in lines[0] and "cache_hit true" in lines[1]
        assert "transport shm" in lines[0] and "grid_thw [1, " in lines[0]
        # no image of one's own: the built-in test pattern, verified the same way
        cli = subprocess.run([sys.executable, "-m", "smg_fast.client", "--test-pattern",
                              "--target", target, "--verify"],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout.startswith("test-pattern 1920x1080 JPEG: pixel_values (10764, 1176)")
        assert "identical to in-process" in cli.stdout

        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                         timeout=10).read().decode()
        for name in ("smg_fast_requests_total", "smg_fast_preprocess_seconds_bucket",
                     "smg_fast_decode_seconds", "smg_fast_transport_seconds",
                     "smg_fast_bytes_out_total", "smg_fast_pixel_cache_hits_total",
                     "smg_fast_pixel_cache_bytes", "smg_fast_scratch_live_bytes"):
            assert name in metrics, name

        # SIGTERM with requests in flight: all of them complete, exactly.
        big = [real_images.bytes(n) for n in ("retina", "hubble", "coffee", "astronaut")] * 2
        refs = [ours("qwen2_vl")(b)["pixel_values"] for b in big[:4]]

        def call(i):
            with Client(target, timeout=60) as c:
                return i, c.preprocess(big[i], transport="shm")

        def in_flight() -> float:
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                          timeout=10).read().decode()
            m = re.search(r"^smg_fast_in_flight_requests (\S+)$", text, re.MULTILINE)
            return float(m.group(1)) if m else 0.0

        with concurrent.futures.ThreadPoolExecutor(len(big)) as ex:
            futs = [ex.submit(call, i) for i in range(len(big))]
            deadline = time.monotonic() + 30
            while in_flight() < 2:  # the signal must come mid-flight
                assert time.monotonic() < deadline, "requests never got in flight"
                time.sleep(0.005)
            proc.send_signal(signal.SIGTERM)
            done, refused = [], 0
            for f in futs:
                try:
                    done.append(f.result())
                except grpc.RpcError as exc:  # arrived after the drain began
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    refused += 1
        for i, out in done:
            assert np.array_equal(out.pixel_values, refs[i % 4])
        assert proc.wait(timeout=60) == 0
        log = proc.stderr.read()
        m = re.search(r"draining: (\d+) request\(s\) in flight", log)
        assert m and int(m.group(1)) >= 2, log
        assert len(done) >= int(m.group(1))  # every request in flight was answered
        assert "stopped" in log
        assert "Traceback" not in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = [n for n in os.listdir("/dev/shm") if n.startswith(f"smg-fast-{proc.pid}-")]
    assert not left


def test_sigterm_unlinks_unread_segments(small_jpegs, track_pid):
    srv = ServerProcess(["--drain-timeout-s", "0.5"])
    proc, target = srv.proc, srv.target
    track_pid(srv.pid)
    try:
        srv.wait()
        from smg_fast._proto import preprocessor_pb2 as pb

        with Client(target) as c:
            resp = c._stub.Preprocess(pb.PreprocessRequest(
                items=[pb.MediaItem(data=small_jpegs["china"])], transport="shm",
                shm_namespace=c.namespace), timeout=30)  # (shm goes only where it can be read)
        name = resp.items[0].pixel_values.shm.name
        assert name and os.path.exists(f"/dev/shm/{name}")  # delivered, never read
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert not os.path.exists(f"/dev/shm/{name}")
        assert "unlinked 1 unread shm segment" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_config_object_validates():
    with pytest.raises(ValueError):
        ServerConfig(models=[]).validate()
