"""data.

URLs (RFC 2397) to the bytes they carry: one reading for the server, which refuses a malformed one,
and the routing, which keys an image by the same bytes the server hashes."""

from __future__ import annotations

import base64
import binascii
import urllib.parse


def data_url_bytes(url: str) -> bytes:
    """The bytes a ``data:`` URL carries (``;base64`` or percent-encoded).

    ValueError saying what is malformed."""
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise ValueError("malformed data: URL (no ',')")
    if header.lower().endswith(";base64"):
        try:
            return base64.b64decode(payload.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"malformed base64 in data: URL ({exc})") from None
    return urllib.parse.unquote_to_bytes(payload)
