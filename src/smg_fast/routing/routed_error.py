"""A routed request's error.

The server's code and details, with the item indices of a member's sub-request rewritten to the
caller's."""

from __future__ import annotations

import re

import grpc

_ITEM = re.compile(r"\bitem (\d+)\b")


class RoutedError(grpc.RpcError):
    """A failed routed request.

    The server's code and details, item indices rewritten to the caller's; ``index`` is that item's
    position in the caller's request (None: whole request); ``retryable`` (RESOURCE_EXHAUSTED)
    whether trying again later can help."""

    def __init__(self, code: grpc.StatusCode, details: str, index: int | None = None,
                 retryable: bool = False) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details, self.index = code, details, index
        self.retryable = retryable

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def renumber(details: str, indices: list[int]) -> tuple[str, int | None]:
    """The server named items of its sub-request; the caller knows them by its own indices."""
    found: list[int] = []

    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        if k >= len(indices):
            return m.group(0)
        found.append(indices[k])
        return f"item {indices[k]}"

    text = _ITEM.sub(sub, details)
    return text, (found[0] if found else None)


def name_items(text: str, indices: list[int]) -> tuple[str, int | None]:
    """The error text of a failed sub-call, naming its items by the caller's indices.

    An answer that names no item (gRPC's own errors: a message over the size limit) failed the whole
    sub-call. Returns the text with its items, and the index when it had one."""
    if len(indices) == 1:
        return f"{text} (item {indices[0]})", indices[0]
    return f"{text} (items {', '.join(map(str, indices))} of the request)", None
