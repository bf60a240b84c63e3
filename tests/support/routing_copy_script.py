"""Run by test_routing_dispatch.py in a fresh process.

Routes one 32 MiB request of 32 images over 4 in-process members that hold their sub-requests until
all are placed, and prints the request's size, how much the process's peak memory grew while the
sub-requests were built (KiB) and how many sub-calls there were."""

from __future__ import annotations

import asyncio
import resource

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.member import Member


class _Call:
    def __init__(self, coro) -> None:
        self.task = asyncio.ensure_future(coro)

    def __await__(self):
        return self.task.__await__()

    def cancel(self) -> None:
        self.task.cancel()


class _Stub:
    def __init__(self, gate: asyncio.Event) -> None:
        self.gate, self.calls = gate, 0

    def Preprocess(self, sub, timeout=None):  # noqa: N802 (the gRPC method's name)
        self.calls += 1

        async def answer():
            await self.gate.wait()  # the sub-request stays alive until every one is built
            return pb.PreprocessResponse(items=[pb.ProcessedItem() for _ in sub.items])

        return _Call(answer())


async def _passthrough(m, resp):
    return list(resp.items)


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def main() -> None:
    fl = Fleet([], keepalive_s=0, floor=64)
    gate = asyncio.Event()
    info = pb.GetModelInfoResponse(default_model="m", models=[pb.ModelInfo(name="m")])
    for k in range(4):
        m = Member(f"10.0.0.{k}:50051", None, _Stub(gate), info=info, state="serving")
        m.last_info = info
        fl.membership.members[m.target] = m
    req = pb.PreprocessRequest(model="m")
    for k in range(32):  # built in place: no second copy of the images before the route
        req.items.add().data = k.to_bytes(4, "little") * (1 << 18)
    before = _peak_kib()
    task = asyncio.ensure_future(fl.route(req, _passthrough, 30))
    members = fl.membership.members.values()
    while sum(m.in_flight for m in members) < len(req.items):
        await asyncio.sleep(0.01)
    grown = _peak_kib() - before
    gate.set()
    await task
    print(req.ByteSize() >> 10, grown, sum(m.stub.calls for m in members))


if __name__ == "__main__":
    asyncio.run(main())
