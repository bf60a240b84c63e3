"""The NAL unit types of an H.264 / HEVC packet, and whether it starts a closed group (IDR)."""

from __future__ import annotations

from typing import Any

# NAL unit types of an IDR picture: H.264's, and HEVC's IDR_W_RADL / IDR_N_LP (a CRA or BLA
# picture's leading frames may refer to the group before: not a boundary).
IDR_TYPES = {"h264": {5}, "hevc": {19, 20}}


def nal_types(data: bytes, codec: str, length_size: int) -> list[int]:
    """The NAL unit types in one packet (length-prefixed when length_size, else Annex B)."""
    units: list[bytes] = []
    if length_size:
        i = 0
        while i + length_size <= len(data):
            n = int.from_bytes(data[i:i + length_size], "big")
            i += length_size
            if n == 0 or i + n > len(data):
                break
            units.append(data[i:i + 1])
            i += n
    else:
        for part in data.split(b"\x00\x00\x01")[1:]:
            if part:
                units.append(part[:1])
    if codec == "h264":
        return [u[0] & 0x1F for u in units]
    return [(u[0] >> 1) & 0x3F for u in units]


def nal_length_size(header: Any) -> int:
    """Bytes of each NAL unit's length prefix (avcC / hvcC extradata), 0 for Annex B."""
    extra = bytes(header.stream.codec_context.extradata or b"")
    if not extra or extra[0] != 1:
        return 0
    at = 4 if header.codec == "h264" else 21
    return (extra[at] & 3) + 1 if len(extra) > at else 0


def is_idr(packet: Any, codec: str, length_size: int) -> bool:
    """Whether packet is a keyframe holding an IDR picture."""
    return bool(packet.is_keyframe) and bool(
        IDR_TYPES[codec] & set(nal_types(bytes(packet), codec, length_size)))


def slice_segments(packet: Any, length_size: int) -> int:
    """The HEVC slice segments (VCL NAL units, types 0-31) in packet."""
    return sum(t < 32 for t in nal_types(bytes(packet), "hevc", length_size))


__all__ = ["IDR_TYPES", "is_idr", "nal_length_size", "nal_types", "slice_segments"]
