"""Fixtures of the routing tests: fleets of server processes, and the images they serve.

The fleets are real server processes on loopback; the images come with the in-process
processor's pixel_values for them.
"""

from __future__ import annotations

import pytest
from support.routing_common import SERVER_ARGS, crops, start_servers, stop


def _fleet(request):
    """Three servers started side by side (each waits for SERVING); stopped whatever happens.

    They run with the module's FLEET_ARGS, SERVER_ARGS where it sets none.
    """
    servers = start_servers(3, getattr(request.module, "FLEET_ARGS", SERVER_ARGS))
    try:
        yield servers
    finally:
        stop(servers)


# One fleet per module for the tests that leave every member serving; a fresh one for each test
# that kills or drains a member.
fleet = pytest.fixture(scope="module", name="fleet")(_fleet)
fresh_fleet = pytest.fixture(name="fresh_fleet")(_fleet)


@pytest.fixture(scope="session")
def images(real_images):
    """Factory: images(count) -> (count small JPEG crops, their pixel_values), once per count.

    The crops are distinct real-photo JPEGs; pixel_values from the in-process qwen2_vl processor.
    """
    from smg_fast import load_processor

    cache: dict[int, tuple[list, list]] = {}

    def factory(count: int) -> tuple[list, list]:
        if count not in cache:
            imgs = crops(real_images, count)
            proc = load_processor("qwen2_vl")
            cache[count] = imgs, [proc(im)["pixel_values"] for im in imgs]
        imgs, refs = cache[count]
        return list(imgs), list(refs)

    return factory
