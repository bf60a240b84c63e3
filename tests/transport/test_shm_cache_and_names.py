"""Shm segments cannot poison the pixel cache, and read_tensor takes only trusted ones.

The pixel cache never serves bytes a consumer wrote into a segment it received, and read_tensor maps
and unlinks only smg-fast segments of trusted producers."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("grpc")

from support.images import encode  # noqa: E402

from smg_fast._proto import tensor_pb2  # noqa: E402
from smg_fast.client import Client, build_request  # noqa: E402
from smg_fast.testing.servers import ServerProcess  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    UntrustedSegmentError,
    read_tensor,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")


# ------------------------------------------------------------------------------------------
# 1. cache poisoning
# ------------------------------------------------------------------------------------------


def test_consumer_writing_or_truncating_its_segment_cannot_poison_the_cache(
        real_images, ours, track_pid):
    """A consumer that overwrites or truncates its segment cannot poison the cache.

    The consumer runs as the server's user and makes its delivered segment writable and overwrites
    it, or truncates it; later cache hits still return the server's bytes."""
    srv = ServerProcess(["--pixel-cache-mb", "256", "--transport", "shm", "--workers", "2",
                         "--rdma-listen-port", "0"])
    proc, target = srv.proc, srv.target
    track_pid(srv.pid)
    images = {"overwrite": encode(real_images.rgb("chelsea"), "PNG"),
              "truncate": encode(real_images.rgb("astronaut"), "JPEG", quality=90)}
    try:
        srv.wait()
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
