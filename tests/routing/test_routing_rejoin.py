"""A member restarted on its port rejoins, and every try while it was away is logged at info."""

from __future__ import annotations

import asyncio
import logging

from support.routing_common import SERVER_ARGS, check, stop

from smg_fast.routing import AsyncRoutedClient
from smg_fast.testing.servers import ServerProcess


def test_restarted_member_rejoins_and_each_try_is_logged(images, caplog):
    imgs, refs = images(6)
    servers = [ServerProcess(SERVER_ARGS) for _ in range(2)]
    caplog.set_level(logging.INFO, logger="smg_fast.routing")
    try:
        for s in servers:
            s.wait()
        port, target = servers[1].port, servers[1].target

        async def main() -> None:
            async with AsyncRoutedClient([s.target for s in servers], floor=1) as fleet:
                check(await fleet.preprocess(imgs), list(range(6)), refs)
                servers[1].kill()
                member = fleet.membership.members[target]
                while member.state != "down":
                    await asyncio.sleep(0.02)
                tries = [r for r in caplog.records if "asking again" in r.getMessage()]
                while len([r for r in caplog.records if "asking again" in r.getMessage()]) \
                        < len(tries) + 3:  # it keeps asking, and says so each time
                    await asyncio.sleep(0.05)
                servers[1] = await asyncio.to_thread(
                    lambda: ServerProcess(SERVER_ARGS, port=port).wait())
                while member.state != "serving":
                    await asyncio.sleep(0.02)
                out = await fleet.preprocess(imgs)
                check(out, list(range(6)), refs)
                assert {it.worker for it in out.items} == {s.target for s in servers}

        asyncio.run(main())
    finally:
        stop(servers)
    lines = [r for r in caplog.records if target in r.getMessage()]
    assert all(r.levelno >= logging.INFO for r in lines)
    assert any("UNAVAILABLE; asking again" in r.getMessage() for r in lines)
