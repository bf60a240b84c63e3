"""What the fleet makes of the messages of one routed request.

A member's sub-request built from the caller's without copying the other members' images, and the
shm segments of an answer nobody will read unlinked."""

from __future__ import annotations

import os
from typing import Any

from .._proto import preprocessor_pb2 as pb
from ..transport.shm_owner import SHM_DIR, is_segment_name


def release(resp: Any) -> int:
    """Unlinks the shm segments a response we will not use holds; returns how many."""
    n = 0
    for it in resp.items:
        if it.pixel_values.WhichOneof("payload") != "shm":
            continue  # inline: garbage; remote: the server reaps the slot at its TTL
        name = it.pixel_values.shm.name
        if not is_segment_name(name):
            continue  # never unlink what is not an smg-fast segment
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            n += 1
        except FileNotFoundError:
            pass
    return n


def without_items(req: Any, model: str) -> Any:
    """req's fields but its items (every other field is a scalar), for model.

    What each sub-call copies, so that no sub-call copies the images of the others."""
    out = pb.PreprocessRequest()
    for fd, value in req.ListFields():
        if fd.name != "items":
            setattr(out, fd.name, value)
    out.model = model
    return out


def sub_request(template: Any, req: Any, idx: list[int]) -> Any:
    """The sub-request of the caller's items idx: the template and those items only."""
    sub = pb.PreprocessRequest()
    sub.CopyFrom(template)
    sub.items.extend(req.items[i] for i in idx)
    return sub
