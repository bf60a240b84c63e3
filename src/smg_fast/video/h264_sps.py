"""An H.264 stream's sequence parameter set, read from its avcC header (ITU-T H.264 7.3.2.1.1).

What FFmpeg's probe decode would learn from a stream's first picture (``probe_skip.py``): the
chroma format and bit depths, progressive frames, the reorder depth
(``bitstream_restriction_flag``, which FFmpeg's decoder then follows whatever the container
says), the cropped frame size and the colour range. Read as FFmpeg's parser reads them; fields
it reads otherwise than the standard, or refuses, are refused here.
"""

from __future__ import annotations

from dataclasses import dataclass

# profile_idc values whose SPS carries chroma_format_idc, bit depths and scaling lists, as
# FFmpeg's H.264 parser reads them; the ones where it and the standard (7.3.2.1.1) disagree are
# not read (their streams are probed as usual).
_HIGH_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138})
_DISPUTED_PROFILES = frozenset({134, 135, 139, 144})
_MAX_REORDER = 16  # FFmpeg refuses an SPS with more
_NAL_SPS = 7
_NAL_IDR = 5
_NAL_PPS = 8
_MAX_UE_BITS = 31  # an Exp-Golomb code longer than this is no value an SPS holds


@dataclass(frozen=True)
class Sps:
    """The SPS fields that decide whether FFmpeg's probe decode can be skipped."""

    profile_idc: int
    chroma_format_idc: int
    bit_depth_luma: int
    bit_depth_chroma: int
    frame_mbs_only: bool
    bitstream_restriction: bool
    max_num_reorder_frames: int | None
    full_range: bool = False  # video_full_range_flag (FFmpeg's yuvj420p)
    coded_size: tuple[int, int] = (0, 0)  # the macroblocks' width and height in pixels
    crop: tuple[int, int, int, int] = (0, 0, 0, 0)  # frame_crop left, right, top, bottom offsets

    @property
    def cropped_size(self) -> tuple[int, int] | None:
        """The decoded frames' width and height (7.4.2.1.1), for 4:2:0 progressive frames.

        None for other formats and for a crop on the left or top (FFmpeg may shift those to keep
        alignment)."""
        left, right, top, bottom = self.crop
        if self.chroma_format_idc != 1 or not self.frame_mbs_only or left or top:
            return None
        width, height = self.coded_size[0] - 2 * right, self.coded_size[1] - 2 * bottom
        return (width, height) if width > 0 and height > 0 else None

    @property
    def states_decoder_setup(self) -> bool:
        """True when the SPS alone gives FFmpeg the pixel format (yuv420p) and reorder depth."""
        return (self.chroma_format_idc == 1 and self.bit_depth_luma == 8
                and self.bit_depth_chroma == 8 and self.frame_mbs_only
                and self.bitstream_restriction)


class _Bits:
    """An MSB-first bit reader over an RBSP's data bits; IndexError at its stop bit."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        last = len(data) - 1
        while last >= 0 and data[last] == 0:
            last -= 1
        # rbsp_stop_one_bit: the last 1 bit (no data bits at all without one)
        self.end = 8 * last + 7 - (data[last] & -data[last]).bit_length() + 1 if last >= 0 else 0

    def bit(self) -> int:
        if self.pos >= self.end:
            raise IndexError("read past the RBSP's data")
        byte = self.data[self.pos >> 3]
        self.pos += 1
        return (byte >> (7 - ((self.pos - 1) & 7))) & 1

    def bits(self, n: int) -> int:
        v = 0
        for _ in range(n):
            v = (v << 1) | self.bit()
        return v

    def ue(self) -> int:
        zeros = 0
        while self.bit() == 0:
            zeros += 1
            if zeros > _MAX_UE_BITS:
                raise ValueError("Exp-Golomb code too long")
        return (1 << zeros) - 1 + self.bits(zeros)

    def se(self) -> int:
        k = self.ue()
        return (k + 1) // 2 if k & 1 else -(k // 2)


def _rbsp(nal: bytes) -> bytes:
    """The NAL unit's payload with emulation prevention bytes (00 00 03) removed.

    ValueError at 00 00 00, 00 00 01 or 00 00 02, where FFmpeg ends the NAL unit."""
    out = bytearray()
    zeros = 0
    for b in nal:
        if zeros >= 2 and b < 3:
            raise ValueError("a start code inside the NAL unit")
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def _at_most(value: int, limit: int, name: str) -> int:
    """value, or ValueError past limit (a value FFmpeg refuses the SPS for)."""
    if value > limit:
        raise ValueError(f"{name} {value} is over {limit}")
    return value


def _skip_scaling_list(r: _Bits, size: int) -> None:
    last = next_ = 8
    for _ in range(size):
        if next_:
            delta = r.se()
            if not -128 <= delta <= 127:
                raise ValueError(f"delta_scale {delta} outside -128..127")
            next_ = (last + delta + 256) % 256
        last = next_ or last


def _skip_hrd(r: _Bits) -> None:
    count = _at_most(r.ue(), 31, "cpb_cnt_minus1") + 1
    r.bits(8)  # bit_rate_scale, cpb_size_scale
    for _ in range(count):
        r.ue()
        r.ue()
        r.bit()
    r.bits(20)  # four 5-bit lengths


def parse_sps(nal: bytes) -> Sps:
    """The fields of one SPS NAL unit (its header byte first). ValueError if it is not one."""
    if not nal or nal[0] & 0x1F != _NAL_SPS:
        raise ValueError("not an SPS NAL unit")
    r = _Bits(_rbsp(nal[1:]))
    try:
        profile = r.bits(8)
        if profile in _DISPUTED_PROFILES:
            raise ValueError(f"profile_idc {profile} is not read")
        r.bits(16)  # constraint flags, reserved bits, level_idc
        _at_most(r.ue(), 31, "seq_parameter_set_id")
        chroma, depth_luma, depth_chroma = 1, 8, 8
        if profile in _HIGH_PROFILES:
            chroma = _at_most(r.ue(), 3, "chroma_format_idc")
            if chroma == 3:
                r.bit()  # separate_colour_plane_flag
            depth_luma = r.ue() + 8
            depth_chroma = r.ue() + 8
            r.bit()  # qpprime_y_zero_transform_bypass_flag
            if r.bit():  # seq_scaling_matrix_present_flag
                for i in range(8 if chroma != 3 else 12):
                    if r.bit():
                        _skip_scaling_list(r, 16 if i < 6 else 64)
        _at_most(r.ue(), 12, "log2_max_frame_num_minus4")
        poc_type = _at_most(r.ue(), 2, "pic_order_cnt_type")
        if poc_type == 0:
            _at_most(r.ue(), 12, "log2_max_pic_order_cnt_lsb_minus4")
        elif poc_type == 1:
            r.bit()
            r.se()
            r.se()
            cycle = r.ue()
            if cycle > 255:
                raise ValueError("num_ref_frames_in_pic_order_cnt_cycle over 255")
            for _ in range(cycle):
                r.se()
        _at_most(r.ue(), 16, "max_num_ref_frames")
        r.bit()  # gaps_in_frame_num_value_allowed_flag
        width_mbs = r.ue() + 1  # pic_width_in_mbs_minus1
        height_units = r.ue() + 1  # pic_height_in_map_units_minus1
        frame_mbs_only = bool(r.bit())
        if not frame_mbs_only:
            r.bit()  # mb_adaptive_frame_field_flag
        r.bit()  # direct_8x8_inference_flag
        crop = (r.ue(), r.ue(), r.ue(), r.ue()) if r.bit() else (0, 0, 0, 0)  # frame_cropping
        restriction, reorder, full_range = False, None, False
        if r.bit():  # vui_parameters_present_flag (E.1.1)
            if r.bit() and r.bits(8) == 255:  # aspect_ratio_info, Extended_SAR
                r.bits(32)
            if r.bit():  # overscan_info_present_flag
                r.bit()
            if r.bit():  # video_signal_type_present_flag
                r.bits(3)  # video_format
                full_range = bool(r.bit())
                if r.bit():  # colour_description_present_flag
                    r.bits(24)
            if r.bit():  # chroma_loc_info_present_flag
                r.ue()
                r.ue()
            if r.bit():  # timing_info_present_flag
                r.bits(65)
            nal_hrd = r.bit()
            if nal_hrd:
                _skip_hrd(r)
            vcl_hrd = r.bit()
            if vcl_hrd:
                _skip_hrd(r)
            if nal_hrd or vcl_hrd:
                r.bit()  # low_delay_hrd_flag
            r.bit()  # pic_struct_present_flag
            restriction = bool(r.bit())
            if restriction:
                r.bit()  # motion_vectors_over_pic_boundaries_flag
                for _ in range(4):
                    r.ue()
                reorder = r.ue()
                if reorder > _MAX_REORDER:
                    raise ValueError(f"max_num_reorder_frames {reorder} is over {_MAX_REORDER}")
                r.ue()  # max_dec_frame_buffering
    except IndexError:
        raise ValueError("SPS ends early") from None
    coded = (16 * width_mbs, 16 * height_units * (1 if frame_mbs_only else 2))
    return Sps(profile, chroma, depth_luma, depth_chroma, frame_mbs_only, restriction, reorder,
               full_range, coded, crop)


def avcc_sps(extradata: bytes | None) -> Sps | None:
    """The SPS of an avcC record holding exactly one SPS then only PPSs, or None.

    None for Annex B, several SPSs, malformed records, and any other NAL unit in the PPS list
    (FFmpeg decodes each by its own type: an SPS there would replace the one read here)."""
    if not extradata or len(extradata) < 8 or extradata[0] != 1:
        return None
    if extradata[5] & 0x1F != 1:  # numOfSequenceParameterSets
        return None
    size = int.from_bytes(extradata[6:8], "big")
    nal = extradata[8:8 + size]
    if len(nal) != size or not _only_pps(extradata, 8 + size):
        return None
    try:
        return parse_sps(nal)
    except ValueError:
        return None


def _only_pps(extradata: bytes, at: int) -> bool:
    """True when the avcC's PPS list at offset ``at`` holds only whole PPS NAL units."""
    if at >= len(extradata):
        return False
    count, at = extradata[at], at + 1  # numOfPictureParameterSets
    for _ in range(count):
        if at + 2 > len(extradata):
            return False
        size = int.from_bytes(extradata[at:at + 2], "big")
        nal = extradata[at + 2:at + 2 + size]
        if size == 0 or len(nal) != size or nal[0] & 0x1F != _NAL_PPS:
            return False
        at += 2 + size
    return True


def _avcc_nals(data: bytes, length_size: int) -> list[bytes] | None:
    """The NAL units of a length-prefixed (AVCC) sample, or None if the lengths do not add up."""
    nals, pos = [], 0
    while pos < len(data):
        if pos + length_size > len(data):
            return None
        size = int.from_bytes(data[pos:pos + length_size], "big")
        pos += length_size
        if size == 0 or pos + size > len(data):
            return None
        nals.append(data[pos:pos + size])
        pos += size
    return nals


def uses_avcc_sps(extradata: bytes, packet: bytes, idr: bool = False) -> bool:
    """True when packet (an MP4 sample) carries no SPS but the avcC's own (``idr``: and an IDR).

    The first pictures then decode with the avcC's SPS: what FFmpeg's probe would learn from
    decoding them, that SPS already says."""
    if len(extradata) < 8 or extradata[0] != 1:
        return False
    sps = extradata[8:8 + int.from_bytes(extradata[6:8], "big")]
    nals = _avcc_nals(packet, (extradata[4] & 3) + 1)
    if not nals:
        return False
    if idr and not any(nal[0] & 0x1F == _NAL_IDR for nal in nals):
        return False
    return all(nal == sps for nal in nals if nal[0] & 0x1F == _NAL_SPS)


__all__ = ["Sps", "avcc_sps", "parse_sps", "uses_avcc_sps"]
