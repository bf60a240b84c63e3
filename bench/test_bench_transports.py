"""Transport benchmarks: moving 1, 8, 24 and 32 MiB payloads, and a 1080p image end to end.

    python -m pytest bench/test_bench_transports.py --benchmark-only --benchmark-json=/tmp/t.json
    python bench/summarize.py /tmp/t.json

Payloads (extra_info transport / mb): the consumer's side of each transport, for bytes that
another process produced. ``rdma``: Puller.pull of a slot a peer exporter process wrote (NIXL READ
over UCX, frame check, notification); the result is in local memory. ``shm``: read_tensor of a
segment the peer wrote, plus touching every page, so the bytes are as usable as a pulled buffer.
``inline``: parsing a serialized TensorData carrying the bytes and viewing them as an array (what
a gRPC consumer does after the message arrived; the network copy itself is not included).

End to end (extra_info e2e): Client.preprocess of a 1920x1080 JPEG against a real server process
(cache off) with transport rdma or shm, including the consumer's pull or mapping; float32 and
bfloat16.
"""

from __future__ import annotations

import io
import subprocess
import time

import numpy as np
import pytest

from smg_fast.transport.rdma.nixl import NIXL_MODULES

MiB = 1 << 20
SIZES_MB = (1, 8, 24, 32)  # 24 MiB: a 1080p image in bfloat16
ROUNDS = {1: 200, 8: 60, 24: 30, 32: 30}


def _nixl_installed() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(m.split(".")[0]) for m in NIXL_MODULES)


needs_nixl = pytest.mark.skipif(not _nixl_installed(), reason="NIXL is not installed")


@pytest.fixture(scope="module")
def peer():
    from smg_fast.testing.rdma_peer import PeerProcess

    p = PeerProcess(slots=4, slot_bytes=33 * MiB)
    yield p
    p.close()


@pytest.fixture(scope="module")
def puller():
    from smg_fast.transport.rdma import Puller

    with Puller(slots=2, slot_bytes=33 * MiB) as p:
        yield p


def _info(benchmark, transport: str, mb: int) -> None:
    benchmark.extra_info.update(transport=transport, mb=mb, side="consumer")


@needs_nixl
@pytest.mark.parametrize("mb", SIZES_MB)
def test_payload_rdma(benchmark, peer, puller, mb):
    from smg_fast.testing.rdma_peer import payload

    nbytes = mb * MiB

    def setup():
        return (peer.export(nbytes, seed=mb, op="copy_in"),), {}

    got = puller.pull(setup()[0][0])
    assert np.array_equal(got, payload(nbytes, mb))  # checked once, outside the timing
    del got
    _info(benchmark, "rdma", mb)
    benchmark.pedantic(lambda h: puller.pull(h), setup=setup, rounds=ROUNDS[mb],
                       warmup_rounds=2)


@needs_nixl
@pytest.mark.parametrize("mb", SIZES_MB)
def test_payload_shm(benchmark, peer, mb):
    from smg_fast._proto import tensor_pb2
    from smg_fast.testing.rdma_peer import payload
    from smg_fast.transport.tensors import read_tensor

    nbytes = mb * MiB

    def setup():
        r = peer.cmd(op="shm", nbytes=nbytes, seed=mb)
        return (tensor_pb2.TensorData.FromString(bytes.fromhex(r["tensor"])),), {}

    def consume(td):
        arr = read_tensor(td)
        arr[::4096].sum()  # fault every page in: the bytes are now usable like a pulled buffer
        return arr

    assert np.array_equal(consume(setup()[0][0]), payload(nbytes, mb))
    _info(benchmark, "shm", mb)
    benchmark.pedantic(consume, setup=setup, rounds=ROUNDS[mb], warmup_rounds=2)


@pytest.mark.parametrize("mb", SIZES_MB)
def test_payload_inline(benchmark, mb):
    from smg_fast._proto import tensor_pb2
    from smg_fast.transport.tensors import read_tensor

    data = np.random.default_rng(mb).integers(0, 256, mb * MiB, dtype=np.uint8)
    wire = tensor_pb2.TensorData(shape=[data.size], dtype="uint8",
                                 inline=data.tobytes()).SerializeToString()

    def consume():
        return read_tensor(tensor_pb2.TensorData.FromString(wire))

    assert np.array_equal(consume(), data)
    _info(benchmark, "inline", mb)
    benchmark.pedantic(consume, rounds=ROUNDS[mb], warmup_rounds=2)


# ---- 1080p end to end ----


@pytest.fixture(scope="module")
def server_target():
    from smg_fast.testing.servers import ServerProcess

    srv = ServerProcess(["--transport", "rdma", "--rdma-listen-port", "0", "--rdma-slots", "4",
                         "--rdma-slot-mb", "64", "--log-level", "warning"],
                        stderr=subprocess.DEVNULL)
    with srv:
        yield srv.target


@pytest.fixture(scope="module")
def jpeg_1080p():
    from PIL import Image

    from smg_fast.imaging.sample import sample_image

    buf = io.BytesIO()
    Image.fromarray(sample_image(1920, 1080)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@needs_nixl
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("transport", ["rdma", "shm"])
def test_e2e_1080p(benchmark, server_target, jpeg_1080p, transport, dtype):
    from smg_fast.client import Client
    from smg_fast.transport.rdma import Puller

    with Puller(slots=2, slot_bytes=64 * MiB) as p, Client(server_target, puller=p) as c:
        out = c.preprocess(jpeg_1080p, transport=transport, dtype=dtype)
        assert out.items[0].transport == transport
        del out
        benchmark.extra_info.update(e2e="1920x1080 JPEG", transport=transport, dtype=dtype)

        def gap():
            time.sleep(0.05)  # idle between requests (not timed), as for docs/performance.md

        benchmark.pedantic(lambda: c.preprocess(jpeg_1080p, transport=transport, dtype=dtype),
                           setup=gap, rounds=25, warmup_rounds=2)
