"""The NAL units of H.264 / HEVC packets: types, IDR starts, skip hazards.

Whether a packet starts a closed group (IDR), and whether skipping an H.264 or HEVC stream's
non-reference pictures can change the pictures kept or their count."""

from __future__ import annotations

from typing import Any

from .h264_sps import _Bits, _rbsp, parse_sps

# NAL unit types of an IDR picture: H.264's, and HEVC's IDR_W_RADL / IDR_N_LP (a CRA or BLA
# picture's leading frames may refer to the group before: not a boundary).
IDR_TYPES = {"h264": {5}, "hevc": {19, 20}}


def nal_units(data: bytes, length_size: int) -> list[bytes]:
    """The NAL units of one packet (length-prefixed when length_size, else Annex B)."""
    units: list[bytes] = []
    if length_size:
        i = 0
        while i + length_size <= len(data):
            n = int.from_bytes(data[i:i + length_size], "big")
            i += length_size
            if n == 0 or i + n > len(data):
                break
            units.append(data[i:i + n])
            i += n
    else:
        units = [part for part in data.split(b"\x00\x00\x01")[1:] if part]
    return units


def nal_types(data: bytes, codec: str, length_size: int) -> list[int]:
    """The NAL unit types in one packet (length-prefixed when length_size, else Annex B)."""
    units = nal_units(data, length_size)
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


def _hides_pictures(pps: bytes) -> bool:
    """Whether an HEVC picture parameter set lets slices leave pictures unshown.

    Its output_flag_present_flag; True where it cannot be read."""
    try:
        r = _Bits(_rbsp(pps[2:]))
        r.ue()  # pps_pic_parameter_set_id
        r.ue()  # pps_seq_parameter_set_id
        r.bit()  # dependent_slice_segments_enabled_flag
        return bool(r.bit())
    except (IndexError, ValueError):
        return True


def hevc_skip_hazard(units: list[bytes]) -> str | None:
    """Why skipping an HEVC stream's non-reference pictures could change what it keeps, or None.

    From NAL units of it (a packet's, or its parameter sets'). Several slice segments a picture
    (a skipped picture's later slices changed kept pictures, measured with FFmpeg 8.1); a VCL
    unit of a temporal sub-layer above 0 (FFmpeg skips every sub-layer non-reference picture,
    which pictures of higher sub-layers may refer to). And what makes the decoder output fewer
    pictures than packets, which frame indices counted by pts would not see: a picture parameter
    set with output_flag_present_flag (a picture decoded and never shown), a BLA picture or an
    end of sequence or bitstream (the next CRA's leading pictures are dropped), an IRAP picture
    with no_output_of_prior_pics_flag."""
    vcl = 0
    for u in units:
        if len(u) < 2:
            continue
        kind, temporal_id = (u[0] >> 1) & 0x3F, (u[1] & 7) - 1
        if kind < 32:
            vcl += 1
            if temporal_id > 0:
                return "temporal sub-layers"
            if 16 <= kind <= 18:
                return "a BLA picture (its leading pictures are dropped)"
            if 16 <= kind <= 23 and (len(u) < 3 or u[2] & 0x40):
                return "an IRAP picture that drops the pictures not yet output"
        elif kind == 34 and _hides_pictures(u):
            return "pictures that may not be output"
        elif kind in (36, 37):
            return "an end of sequence (a CRA after it drops its leading pictures)"
    return "several slice segments a picture" if vcl > 1 else None


def h264_skip_hazard(units: list[bytes]) -> str | None:
    """Why skipping an H.264 stream's non-reference pictures could change what it keeps, or None.

    From NAL units of it (a packet's, or its parameter sets'): an SPS that allows field coding
    (fields in packets of their own make one frame of two packets) or omits
    bitstream_restriction (FFmpeg then learns the reorder depth from the pictures it decodes and
    drops those it finds out of order, which a skip decode would learn otherwise); True for one
    it cannot read."""
    for u in units:
        if u and u[0] & 0x1F == 7:
            try:
                sps = parse_sps(u)
            except ValueError:
                return "an SPS that cannot be read"
            if not sps.frame_mbs_only:
                return "field coding"
            if not sps.bitstream_restriction:
                return "no stated reorder depth"
    return None


def avcc_units(extradata: bytes) -> list[bytes]:
    """The NAL units of an H.264 stream's extradata: an avcC record's SPSs and PPSs, or Annex B."""
    if len(extradata) < 7 or extradata[0] != 1:
        return nal_units(extradata, 0)
    units: list[bytes] = []
    at = 5
    for mask in (0x1F, 0xFF):  # numOfSequenceParameterSets, then numOfPictureParameterSets
        if at >= len(extradata):
            break
        count, at = extradata[at] & mask, at + 1
        for _ in range(count):
            size = int.from_bytes(extradata[at:at + 2], "big")
            units.append(extradata[at + 2:at + 2 + size])
            at += 2 + size
    return units


def hevc_parameter_units(extradata: bytes) -> list[bytes]:
    """The NAL units of an HEVC stream's extradata: an hvcC record's arrays, or Annex B."""
    if len(extradata) < 23 or extradata[0] != 1:
        return nal_units(extradata, 0)
    units: list[bytes] = []
    at = 23
    for _ in range(extradata[22]):  # numOfArrays
        if at + 3 > len(extradata):
            break
        count, at = int.from_bytes(extradata[at + 1:at + 3], "big"), at + 3
        for _ in range(count):
            size = int.from_bytes(extradata[at:at + 2], "big")
            units.append(extradata[at + 2:at + 2 + size])
            at += 2 + size
    return units


__all__ = ["IDR_TYPES", "avcc_units", "h264_skip_hazard", "hevc_parameter_units",
           "hevc_skip_hazard", "is_idr", "nal_length_size", "nal_types", "nal_units",
           "slice_segments"]
