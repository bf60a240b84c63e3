"""The shm transport against hostile consumers and faults: a consumer that writes or truncates
a segment it received cannot change what the pixel cache serves; unread segments are capped
(per connection too) and a full tmpfs falls back inline; shm only goes to callers that see the
server's /dev/shm; read_tensor maps only smg-fast segments of trusted owners; orphans of dead
producers are swept across pid namespaces; the segment pool backs off on a small tmpfs."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402
from conftest import encode  # noqa: E402
from test_server_process import free_port, wait_serving  # noqa: E402

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast._proto import tensor_pb2  # noqa: E402
from smg_fast.client import Client, build_request, read_response  # noqa: E402
from smg_fast.transport import shm  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    UntrustedSegmentError,
    read_tensor,
    shm_namespace,
    sweep_dead_segments,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def _wait(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def tmpfs(tmp_path):
    """Factory: tmpfs(size_mb) -> a private tmpfs mount (root only), unmounted at the end."""
    mounts = []

    def make(size_mb: int) -> str:
        d = tmp_path / f"tmpfs{len(mounts)}"
        d.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs",
                              str(d)], capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a private tmpfs: {res.stderr.strip()}")
        mounts.append(str(d))
        return str(d)

    yield make
    for d in mounts:  # lazy: this process keeps its liveness lock file there open
        subprocess.run(["umount", "-l", d], check=False)


@pytest.fixture
def shm_subdir():
    """A private directory on the real /dev/shm tmpfs (sweeps there touch nothing else)."""
    d = os.path.join("/dev/shm", f"smg-fast-test-{uuid.uuid4().hex[:12]}")
    os.mkdir(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _chelsea(real_images) -> bytes:
    return encode(real_images.rgb("chelsea"), "PNG")


def _channel(target: str, max_mb: int = 256) -> grpc.Channel:
    """A channel on its own connection (gRPC shares connections between channels with equal
    arguments in one process; the server counts shm shares per connection)."""
    limit = max_mb << 20
    return grpc.insecure_channel(target, options=[
        ("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit)])


def _call(stub, data: bytes, namespace: str, transport: str = "shm"):
    return stub.Preprocess(build_request(data, transport=transport, namespace=namespace),
                           timeout=60)


def _dir_bytes(d: str) -> int:
    return sum(e.stat().st_size for e in os.scandir(d) if shm.is_segment_name(e.name))


# ------------------------------------------------------------------------------------------
# 1. cache poisoning
# ------------------------------------------------------------------------------------------


def test_consumer_writing_or_truncating_its_segment_cannot_poison_the_cache(
        real_images, ours, track_pid):
    """A consumer running as the server's user makes its delivered segment writable and
    overwrites it, or truncates it; later cache hits still return the server's bytes."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "smg_fast.server", "--port", str(port),
                             "--pixel-cache-mb", "256", "--transport", "shm", "--workers", "2",
                             "--rdma-listen-port", "0"], stderr=subprocess.PIPE, text=True)
    track_pid(proc.pid)
    target = f"127.0.0.1:{port}"
    images = {"overwrite": encode(real_images.rgb("chelsea"), "PNG"),
              "truncate": encode(real_images.rgb("astronaut"), "JPEG", quality=90)}
    try:
        wait_serving(target, proc)
        with Client(target, timeout=60) as c:
            for attack, data in images.items():
                ref = ours("qwen2_vl")(data)["pixel_values"]
                resp = c._stub.Preprocess(build_request(data, transport="shm",
                                                        namespace=c.namespace), timeout=60)
                assert not resp.items[0].cache_hit
                path = os.path.join("/dev/shm", resp.items[0].pixel_values.shm.name)
                os.chmod(path, 0o600)
                fd = os.open(path, os.O_RDWR)
                try:
                    if attack == "overwrite":
                        os.pwrite(fd, b"\x7f" * os.fstat(fd).st_size, 0)
                    else:
                        os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
                os.unlink(path)
                for transport in ("shm", "inline", "shm"):
                    out = c.preprocess(data, transport=transport)
                    assert out.items[0].cache_hit, (attack, transport)
                    assert np.array_equal(out.pixel_values, ref), (attack, transport)
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0


# ------------------------------------------------------------------------------------------
# 3. /dev/shm exhaustion
# ------------------------------------------------------------------------------------------


def test_shm_needs_the_callers_namespace(start_server, real_images, ours):
    data = _chelsea(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_pool_mb=0)
    before = srv.server.registry.created
    with Client(srv.target, timeout=60) as c:
        for namespace in ("", "another-host:1"):
            resp = _call(c._stub, data, namespace)
            assert resp.items[0].transport == "inline"  # a counted fallback
            assert np.array_equal(read_response(resp).pixel_values, ref)
    assert srv.server.registry.created == before  # nothing was written to /dev/shm
    fallbacks = srv.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "shm_namespace", "used": "inline"})
    assert fallbacks == 2
    small = start_server(shm_pool_mb=0, max_message_mb=1)  # the tensor cannot go inline
    with Client(small.target, timeout=60, max_message_mb=1) as c:
        with pytest.raises(grpc.RpcError) as info:
            _call(c._stub, data, "another-host:1")
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "shm_namespace" in info.value.details()
        out = c.preprocess(data, transport="shm")  # with its own namespace: shm
        assert out.items[0].transport == "shm" and np.array_equal(out.pixel_values, ref)


def test_an_abusive_caller_cannot_make_others_fail(start_server, tmpfs, real_images, ours):
    """One connection requests shm and never reads: it holds at most its share (a quarter) of
    the cap, then its items go inline; a second connection still gets shm, exact, and nothing
    fails."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = _chelsea(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=32, shm_pool_mb=0)
    abuser, good = _channel(srv.target), _channel(srv.target)
    try:
        kinds = [_call(pb_grpc.PreprocessorStub(abuser), data, ns).items[0].transport
                 for _ in range(30)]  # 30 x 3.2 MB: more than the whole tmpfs
        held = _dir_bytes(d)
        assert srv.server.registry.share_bytes == 8 << 20
        assert kinds.count("shm") == (8 << 20) // ref.nbytes and held <= 8 << 20
        assert set(kinds[kinds.count("shm"):]) == {"inline"}
        stub = pb_grpc.PreprocessorStub(good)
        for _ in range(5):
            resp = _call(stub, data, ns)
            assert resp.items[0].transport == "shm"
            out = read_tensor(resp.items[0].pixel_values, shm_dir=d)
            assert np.array_equal(out, ref)
        assert _dir_bytes(d) == held  # the good caller's segments were read and unlinked
    finally:
        abuser.close()
        good.close()
        srv.stop(timeout=1)  # unlinks the abuser's unread segments
    assert _dir_bytes(d) == 0


def test_over_its_share_the_abuser_alone_is_refused(start_server, tmpfs, real_images, ours):
    """Tensors too large to go inline: past its share, the abusive connection gets
    RESOURCE_EXHAUSTED; the other connection keeps getting shm."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = _chelsea(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=32, shm_pool_mb=0, max_message_mb=2)
    abuser, good = _channel(srv.target, 2), _channel(srv.target, 2)
    try:
        stub = pb_grpc.PreprocessorStub(abuser)
        fits = (8 << 20) // ref.nbytes  # its share: a quarter of the cap
        for _ in range(fits):
            assert _call(stub, data, ns).items[0].transport == "shm"
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as info:
                _call(stub, data, ns)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "share" in info.value.details()
        stub = pb_grpc.PreprocessorStub(good)
        for _ in range(5):
            resp = _call(stub, data, ns)
            assert resp.items[0].transport == "shm"
            assert np.array_equal(read_tensor(resp.items[0].pixel_values, shm_dir=d), ref)
    finally:
        abuser.close()
        good.close()
        srv.stop(timeout=1)
    assert _dir_bytes(d) == 0


def test_no_shm_room_is_refused_from_the_plan_before_decoding(start_server, tmpfs, real_images,
                                                              ours):
    """Unread segments fill the cap; a tensor too big to go inline is then refused
    RESOURCE_EXHAUSTED from its header, without being decoded (the decode count stays). Once a
    consumer reads a segment, the next request fits again (the check counts reads)."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = _chelsea(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=8, shm_pool_mb=0, max_message_mb=2)
    srv.server.registry.share_bytes = 0  # here one connection may fill the whole cap

    def decodes() -> float:
        return srv.server.metrics.registry.get_sample_value("smg_fast_decode_seconds_count")

    try:
        with _channel(srv.target, 2) as ch:
            stub = pb_grpc.PreprocessorStub(ch)
            held = []
            for _ in range((8 << 20) // ref.nbytes):
                item = _call(stub, data, ns).items[0]
                assert item.transport == "shm"
                held.append(item.pixel_values)
            before = decodes()
            assert before == len(held)
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as info:
                    _call(stub, data, ns)
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--shm-max-outstanding-mb" in info.value.details()
            assert decodes() == before  # refused from the plan
            assert np.array_equal(read_tensor(held.pop(), shm_dir=d), ref)
            # (the registry looks for reads at most once per PRESSURE_PRUNE_S while full)
            time.sleep(2 * srv.server.registry.PRESSURE_PRUNE_S)
            item = _call(stub, data, ns).items[0]
            assert item.transport == "shm" and decodes() == before + 1
            for td in [*held, item.pixel_values]:
                assert np.array_equal(read_tensor(td, shm_dir=d), ref)
    finally:
        srv.stop(timeout=1)
    assert _dir_bytes(d) == 0


def test_a_full_tmpfs_falls_back_inline(start_server, tmpfs, real_images, ours):
    d = tmpfs(8)
    with open(os.path.join(d, "someone-elses-file"), "wb") as fh:
        fh.write(b"\0" * (7 << 20))  # another application filled the tmpfs
    ns = shm_namespace(d)
    data = _chelsea(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_pool_mb=0, shm_max_outstanding_mb=64)  # (over the fs)
    with _channel(srv.target) as ch:
        resp = _call(pb_grpc.PreprocessorStub(ch), data, ns)
    assert resp.items[0].transport == "inline"
    assert np.array_equal(read_response(resp).pixel_values, ref)
    assert srv.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "shm_full", "used": "inline"}) == 1
    assert _dir_bytes(d) == 0  # the failed segment was removed


def test_outstanding_cap_default_flag_and_env(tmpfs):
    from smg_fast.server.config import config_from_args

    d = tmpfs(64)
    assert shm.default_outstanding_cap(d) == 32 << 20  # half the tmpfs (RAM is larger)
    assert config_from_args([], environ={}).shm_max_outstanding_mb == 0  # = that default
    env = {"SMG_FAST_SHM_MAX_OUTSTANDING_MB": "100"}
    assert config_from_args([], environ=env).shm_max_outstanding_mb == 100
    assert config_from_args(["--shm-max-outstanding-mb", "7"],
                            environ=env).shm_max_outstanding_mb == 7
    with pytest.raises(SystemExit):
        config_from_args(["--shm-max-outstanding-mb", "-1"], environ={})
    reg = shm.ShmRegistry(d, max_outstanding_bytes=1 << 20, share_bytes=1 << 19)
    try:
        a = reg.write(1 << 19, lambda s: None, caller="a")
        with pytest.raises(shm.ShmQuotaError) as info:
            reg.write(1, lambda s: None, caller="a")
        assert info.value.reason == "share"
        b = reg.write(1 << 19, lambda s: None, caller="b")
        with pytest.raises(shm.ShmQuotaError) as info:
            reg.write(1, lambda s: None, caller="c")
        assert info.value.reason == "cap"
        os.unlink(os.path.join(d, a))  # read by its consumer: room again (after a prune)
        time.sleep(reg.PRESSURE_PRUNE_S)
        c = reg.write(1 << 19, lambda s: None, caller="c")
        assert sorted(reg.owned()) == sorted([b, c]) and reg.refused == 2
    finally:
        reg.close()


# ------------------------------------------------------------------------------------------
# 10. read_tensor trusts only smg-fast segments of plausible owners
# ------------------------------------------------------------------------------------------


def _td(name: str, owner: str = "") -> tensor_pb2.TensorData:
    return tensor_pb2.TensorData(shape=[4], dtype="float32", shm=tensor_pb2.ShmHandle(
        name=name, nbytes=16, owner_id=owner))


def test_read_tensor_refuses_foreign_files_without_mapping_or_unlinking(tmp_path):
    data = np.arange(4, dtype=np.float32).tobytes()
    tag = "0123456789abcdef"
    names = {"foreign": "other-app-buffer", "other_uid": f"smg-fast-77-{tag}-1",
             "ours": f"smg-fast-77-{tag}-2"}
    for n in names.values():
        (tmp_path / n).write_bytes(data)
    os.chown(tmp_path / names["other_uid"], 65534, 65534)
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    with pytest.raises(UntrustedSegmentError, match="not an smg-fast segment"):
        read_tensor(_td(names["foreign"]), shm_dir=str(tmp_path))
    with pytest.raises(UntrustedSegmentError, match="uid 65534"):
        read_tensor(_td(names["other_uid"]), shm_dir=str(tmp_path))
    with pytest.raises(UntrustedSegmentError, match="owner"):  # handle and name disagree
        read_tensor(_td(names["ours"], owner=f"smg-fast:78-{tag}"), shm_dir=str(tmp_path))
    assert all((tmp_path / n).exists() for n in names.values())  # nothing was unlinked
    got = read_tensor(_td(names["other_uid"]), shm_dir=str(tmp_path), trusted_uids=[65534])
    assert np.array_equal(got, np.arange(4, dtype=np.float32))
    got = read_tensor(_td(names["ours"], owner=f"smg-fast:77-{tag}"), shm_dir=str(tmp_path))
    assert np.array_equal(got, np.arange(4, dtype=np.float32))
    assert sorted(os.listdir(tmp_path)) == ["other-app-buffer"]


# ------------------------------------------------------------------------------------------
# 11. orphans across pid namespaces
# ------------------------------------------------------------------------------------------

_PRODUCER = """
import sys, time
from smg_fast.transport.shm import ShmRegistry
reg = ShmRegistry(sys.argv[1])
print(" ".join(reg.write(4096, lambda s: None) for _ in range(3)), flush=True)
time.sleep(120)
"""


def test_sweep_removes_orphans_of_a_producer_killed_in_another_pid_namespace(shm_subdir):
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) not installed")
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable,
                             "-c", _PRODUCER, shm_subdir], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read().strip()
            if err.startswith("unshare:"):
                pytest.skip(f"cannot make a pid namespace: {err}")
            pytest.fail(f"producer failed: {err}")
        names = line.split()
        assert names and all(n.startswith("smg-fast-1-") for n in names)  # pid 1 there
        lock = f"{names[0].rsplit('-', 1)[0]}.lock"
        assert sweep_dead_segments(shm_subdir) == []  # alive: its lock is held
        assert sorted(os.listdir(shm_subdir)) == sorted([*names, lock])
    finally:
        proc.kill()  # unshare --kill-child: the producer dies with it
        proc.wait(30)
    removed: list[str] = []
    _wait(lambda: bool(removed.extend(sweep_dead_segments(shm_subdir)) or removed),
          what="the producer's lock to be released")
    assert sorted(removed) == sorted(names)
    assert os.listdir(shm_subdir) == []  # the lock file too


def test_sweep_trusts_the_lock_not_the_pid(shm_subdir):
    """An unlocked lock file whose pid is alive here (another namespace's pid) -> swept; a
    held lock whose pid is dead here -> kept."""
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    tag = shm._pidns_tag()
    orphan, live = f"{os.getppid()}-{tag}deadbeef", f"{dead}-{tag}cafef00d"
    files = {p: [f"smg-fast-{p}-{i}" for i in (1, 2)] + [f"smg-fast-{p}.lock"]
             for p in (orphan, live)}
    for group in files.values():
        for n in group:
            with open(os.path.join(shm_subdir, n), "wb") as fh:
                fh.write(b"x")
    fd = os.open(os.path.join(shm_subdir, f"smg-fast-{live}.lock"), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "live" is alive while we hold this
        removed = sweep_dead_segments(shm_subdir)
        assert sorted(removed) == sorted(files[orphan][:2])
        assert sorted(os.listdir(shm_subdir)) == sorted(files[live])
    finally:
        os.close(fd)
    assert sorted(sweep_dead_segments(shm_subdir)) == sorted(files[live][:2])
    assert os.listdir(shm_subdir) == []


_SERVER = """
import asyncio, sys
from smg_fast.server import ServerConfig
from smg_fast.server.app import serve
asyncio.run(serve(ServerConfig(port=int(sys.argv[1]), shm_dir=sys.argv[2], workers=1,
                               rdma_listen_port=0, shm_pool_mb=0, shm_min_bytes=1,
                               drain_timeout_s=1)))
"""


def test_a_killed_server_process_is_swept_and_a_live_one_is_not(small_jpegs, shm_subdir):
    def start() -> tuple[subprocess.Popen, str]:
        port = free_port()
        p = subprocess.Popen([sys.executable, "-c", _SERVER, str(port), shm_subdir],
                             stderr=subprocess.PIPE, text=True)
        wait_serving(f"127.0.0.1:{port}", p)
        return p, f"127.0.0.1:{port}"

    victim, victim_target = start()
    survivor, survivor_target = start()
    try:
        held = {}
        for p, target in ((victim, victim_target), (survivor, survivor_target)):
            with Client(target, timeout=60) as c:
                resp = _call(c._stub, small_jpegs["rocket"], shm_namespace(shm_subdir))
                held[p.pid] = resp.items[0].pixel_values.shm.name
                assert held[p.pid].startswith(f"smg-fast-{p.pid}-")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        assert sweep_dead_segments(shm_subdir) == [held[victim.pid]]
        assert not any(n.startswith(f"smg-fast-{victim.pid}-") for n in os.listdir(shm_subdir))
        assert os.path.exists(os.path.join(shm_subdir, held[survivor.pid]))
    finally:
        for p in (victim, survivor):
            if p.poll() is None:
                p.terminate()
                p.wait(30)
    assert survivor.returncode == 0  # it unlinked its unread segment on the way out
    assert os.listdir(shm_subdir) == []  # and its lock file


# ------------------------------------------------------------------------------------------
# The segment pool on a small tmpfs
# ------------------------------------------------------------------------------------------


def test_pool_backs_off_and_gives_up_a_size_it_cannot_make(tmpfs, caplog):
    from smg_fast.transport.shm_pool import SegmentPool

    d = tmpfs(4)
    pool = SegmentPool(64 << 20, d, quiet_s=0.0, backoff_s=0.01, max_failures=3)
    try:
        with caplog.at_level(logging.DEBUG, logger="smg_fast.shm"):
            for n, size in enumerate((6 << 20, 10 << 20), 1):  # neither fits in 4 MiB
                assert pool.take(size) is None
                _wait(lambda n=n: pool.stats()["abandoned"] == n, what="the pool to give up")
            assert pool.stats()["failed"] == 6  # three tries each, then never again
            assert pool.take(6 << 20) is None
            time.sleep(0.2)
            assert pool.stats()["failed"] == 6
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "giving that size up" in warnings[0].getMessage()
        assert not any(shm.is_segment_name(n) for n in os.listdir(d))
    finally:
        pool.close()


# ------------------------------------------------------------------------------------------
# Segments are unreachable until delivered (a same-uid consumer cannot SIGBUS the server)
# ------------------------------------------------------------------------------------------


def _segment_files(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if shm.is_segment_name(n))


def test_segments_are_invisible_until_delivered(shm_subdir):
    """Neither the pool's ready segments nor one being filled have a name in the directory:
    only delivery (publish) links them, so nobody can open, chmod or truncate them first."""
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=64 << 20)
    reg.pool.quiet_s = 0.0
    size = 3 << 20
    seen_while_filling = []
    try:
        first = reg.write(size, lambda seg: seg.array().fill(1))  # the pool learns the size
        assert _segment_files(shm_subdir) == [first]
        _wait(lambda: reg.pool.stats()["ready"] == reg.pool.depth, what="ready segments")
        assert _segment_files(shm_subdir) == [first]  # ready, but not reachable

        def fill(seg):
            seen_while_filling.append(_segment_files(shm_subdir))
            seg.array().fill(2)

        second = reg.write(size, fill)  # from the pool
        assert reg.pool.stats()["hits"] == 1
        reg.pool.close()  # (fresh segments only from here)
        third = reg.write(size + 1, fill)
        assert seen_while_filling == [[first], sorted([first, second])]
        assert sorted(_segment_files(shm_subdir)) == sorted([first, second, third])
        for name, value, n in ((first, 1, size), (second, 2, size), (third, 2, size + 1)):
            st = os.stat(os.path.join(shm_subdir, name))
            assert st.st_mode & 0o777 == 0o400 and st.st_size == n
            td = tensor_pb2.TensorData(shape=[n], dtype="uint8",
                                       shm=tensor_pb2.ShmHandle(name=name, offset=0, nbytes=n))
            out = read_tensor(td, shm_dir=shm_subdir)
            assert np.array_equal(out, np.full(n, value, np.uint8))
        assert reg.prune() == 0 and reg.stats()["outstanding_bytes"] == 0
    finally:
        reg.close()


_ATTACKED_SERVER = """
import asyncio, sys
from smg_fast.server import ServerConfig
from smg_fast.server.app import serve
asyncio.run(serve(ServerConfig(port=int(sys.argv[1]), shm_dir=sys.argv[2], workers=2,
                               rdma_listen_port=0, shm_pool_mb=int(sys.argv[3]),
                               drain_timeout_s=1)))
"""


@pytest.mark.parametrize("pool_mb", [0, 64])
def test_same_uid_attacker_truncating_segments_cannot_crash_the_server(
        pool_mb, real_images, ours, shm_subdir, track_pid):
    """A consumer running as the server's user lists the directory in a loop and makes every
    smg-fast file it sees writable and empty. Before, it caught segments the server was still
    writing (or ready pool ones), and the server's next store died of SIGBUS. Now it only ever
    sees delivered ones: the server survives, and every tensor the attacker did not truncate
    reads back exact."""
    import threading

    from smg_fast.transport.tensors import TensorError

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _ATTACKED_SERVER, str(port), shm_subdir,
                             str(pool_mb)], stderr=subprocess.PIPE, text=True)
    track_pid(proc.pid)
    target = f"127.0.0.1:{port}"
    images = [encode(real_images.rgb("chelsea"), "PNG"),
              encode(real_images.rgb("astronaut"), "JPEG", quality=90)]
    refs = [ours("qwen2_vl")(data)["pixel_values"] for data in images]
    ns = shm_namespace(shm_subdir)
    stop = threading.Event()
    attacked: set[str] = set()

    def attacker() -> None:
        for _ in range(2_000_000):  # bounded; stops when the requests are done
            if stop.is_set():
                return
            for name in _segment_files(shm_subdir):
                path = os.path.join(shm_subdir, name)
                try:
                    os.chmod(path, 0o600)
                    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
                except OSError:
                    continue  # read and unlinked meanwhile
                try:
                    os.ftruncate(fd, 0)
                    attacked.add(name)
                finally:
                    os.close(fd)

    try:
        wait_serving(target, proc)
        thread = threading.Thread(target=attacker, daemon=True)
        thread.start()
        responses = []
        try:
            with _channel(target) as ch:
                stub = pb_grpc.PreprocessorStub(ch)
                for i in range(24):  # handles kept, read after the attack: no mapping of ours
                    resp = _call(stub, images[i % 2], ns)  # can be truncated under us
                    assert resp.items[0].transport == "shm"
                    responses.append((i % 2, resp.items[0].pixel_values))
        finally:
            stop.set()
            thread.join(30)
        assert proc.poll() is None  # still running: no SIGBUS
        assert attacked  # the attacker did reach delivered segments
        for k, td in responses:
            try:
                out = read_tensor(td, shm_dir=shm_subdir)
            except TensorError as exc:  # it truncated this one after delivery: typed, no bytes
                assert td.shm.name in attacked and "holds 0 bytes" in str(exc)
                os.unlink(os.path.join(shm_subdir, td.shm.name))
                continue
            assert np.array_equal(out, refs[k])
        with Client(target, timeout=60) as c:  # and it keeps serving, exactly
            for data, ref in zip(images, refs, strict=True):
                td = _call(c._stub, data, ns).items[0].pixel_values
                out = read_tensor(td, shm_dir=shm_subdir)
                assert np.array_equal(out, ref)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    assert proc.returncode == 0, proc.stderr.read()
    assert _segment_files(shm_subdir) == []


def test_without_o_tmpfile_segments_are_named_from_creation(shm_subdir, monkeypatch):
    """A filesystem that refuses O_TMPFILE (EOPNOTSUPP) gets today's named 0400 files: visible
    while filled (the documented residual risk), delivered and read exactly the same."""
    import errno

    real_open = os.open

    def no_tmpfile(path, flags, *args, **kwargs):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "no O_TMPFILE here")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_tmpfile)
    reg = shm.ShmRegistry(shm_subdir)
    seen = []

    def fill(seg):
        seen.append(_segment_files(shm_subdir))
        seg.array().fill(7)

    try:
        name = reg.write(1000, fill)
        assert seen == [[name]] and _segment_files(shm_subdir) == [name]
        assert os.stat(os.path.join(shm_subdir, name)).st_mode & 0o777 == 0o400
        td = tensor_pb2.TensorData(shape=[1000], dtype="uint8",
                                   shm=tensor_pb2.ShmHandle(name=name, offset=0, nbytes=1000))
        assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), np.full(1000, 7, np.uint8))
        with pytest.raises(RuntimeError):  # a failed fill leaves no file behind
            reg.write(1000, lambda seg: (_ for _ in ()).throw(RuntimeError("fill failed")))
        assert _segment_files(shm_subdir) == [] and reg.prune() == 0
        assert reg.stats()["outstanding_bytes"] == 0
    finally:
        reg.close()
