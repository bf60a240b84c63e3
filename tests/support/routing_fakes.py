"""In-process fake members for Fleet tests (test_routing_dispatch.py, test_routing_wait.py).

Stubs whose answers the test scripts, no server, no network; and images that prefer a member."""

from __future__ import annotations

import asyncio
import os
import secrets

import grpc

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.member import Member
from smg_fast.routing.placement import item_key, order

MODEL = "qwen2_vl"


class Call:
    """What a grpc.aio unary call offers Fleet: awaitable, cancellable."""

    def __init__(self, coro) -> None:
        self.task = asyncio.ensure_future(coro)

    def __await__(self):
        return self.task.__await__()

    def cancel(self) -> None:
        self.task.cancel()


class Stub:
    def __init__(self, handler) -> None:
        self.handler, self.calls = handler, 0

    def Preprocess(self, sub, timeout=None):  # noqa: N802 (the gRPC method's name)
        self.calls += 1
        return Call(self._answer(sub, timeout))

    async def _answer(self, sub, timeout):
        try:  # the sub-call's deadline, as gRPC ends it
            return await asyncio.wait_for(self.handler(sub), timeout)
        except asyncio.TimeoutError:
            raise error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None


class Health:
    """A member's grpc.health.v1 stub: answers Check while ``alive``, else UNAVAILABLE."""

    def __init__(self, alive: bool = True) -> None:
        self.alive, self.checks = alive, 0

    async def Check(self, request, timeout=None):  # noqa: N802 (the gRPC method's name)
        self.checks += 1
        if not self.alive:
            raise error(grpc.StatusCode.UNAVAILABLE, "no answer")
        return None


def member(fleet: Fleet, target: str, handler, models=(MODEL,), health=None) -> Member:
    info = pb.GetModelInfoResponse(default_model=models[0], models=[
        pb.ModelInfo(name=name, config_fingerprint="fp-" + name) for name in models])
    m = Member(target, None, Stub(handler), info=info, last_info=info, state="serving",
               health=health)
    fleet.membership.members[target] = m
    fleet.membership.known_models.update(models)  # as admission records them
    return m


def error(code: grpc.StatusCode, details: str, retryable: str | None = None):
    trailers = grpc.aio.Metadata(("smg-fast-retryable", retryable)) if retryable else None
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers or grpc.aio.Metadata(),
                                details=details)


def segment() -> str:
    """An smg-fast-shaped segment in /dev/shm (as a server's answer would name)."""
    name = f"smg-fast-{os.getpid()}-{secrets.token_hex(8)}-1"
    with open(f"/dev/shm/{name}", "wb") as f:
        f.write(b"\0" * 64)
    return name


def response(names: list[str]) -> pb.PreprocessResponse:
    resp = pb.PreprocessResponse()
    for name in names:
        resp.items.add().pixel_values.shm.name = name
    return resp


async def passthrough(m, resp):
    return list(resp.items)


def two_images(targets: list[str]) -> tuple[pb.MediaItem, pb.MediaItem]:
    """Two images whose first choices are targets[0] and targets[1]."""
    def first(item):
        return order(item_key(item, MODEL, "", None, None), targets)[0]

    found = {}
    for k in range(500):
        item = pb.MediaItem(data=b"image %d" % k)
        found.setdefault(first(item), item)
        if len(found) == len(targets):
            return found[targets[0]], found[targets[1]]
    raise AssertionError("no images for both members")


def image_preferring(target: str, targets: list[str]) -> pb.MediaItem:
    for k in range(500):
        item = pb.MediaItem(data=b"image %d" % k)
        if order(item_key(item, MODEL, "", None, None), targets)[0] == target:
            return item
    raise AssertionError(f"no image prefers {target}")
