// AVX-512 horizontal row kernels of the resampler (VBMI, RGB and RGBX), exact to Pillow's integer
// sums: 16 output pixels per group, one channel per register; the source pixels a group reads
// lie in a 128-byte window, or each half's in its own (checked per group when planning), so each
// tap pair is one vpermi2b (two, for halves) that drops the right bytes into every int32 lane,
// and two dot products of the split weights (resample/fixed.hpp): vpmaddwd + vpaddd, or one VNNI
// vpdpwssd. Weights that are int16 values times a power of two (torch's) take one dot product
// per pair. Wider downscales read the row split into channel planes first, where a window spans
// C times the pixels. The plan: resample/avx512_vbmi_plan.cpp.
#include "resample/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "resample/avx512_vbmi.hpp"
#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"
#include "scratch.hpp"

namespace smg {

namespace {

// 3 or 4 channels: one pixel's channels in the int32 lanes of an SSE register (the groups a VBMI
// plan does not fit). Reads 4 bytes per source pixel, so for C == 3 the caller guarantees one
// readable byte after the row.
template <int CI, int CO = CI>
__attribute__((target("avx2"))) void horizontal_row_sse(const uint8_t* in, const AxisWeights& kn, uint8_t* out,
                                                        int out_w, int x_begin = 0, int x_end = -1) {
    const int taps = kn.taps;
    const __m128i zero = _mm_setzero_si128();
    if (x_end < 0) x_end = out_w;
    for (int xx = x_begin; xx < x_end; ++xx) {
        const uint8_t* p = in + int64_t(kn.start[xx]) * CI;
        const int32_t* k = &kn.weights[size_t(xx) * taps];
        __m128i acc = _mm_set1_epi32(kHalf);
        for (int j = 0; j < taps; ++j) {
            uint32_t v;
            std::memcpy(&v, p + j * CI, 4);
            const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(int(v)));
            acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[j])));
        }
        acc = _mm_srai_epi32(acc, kPrecisionBits);
        const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, zero), zero);
        const uint32_t r = uint32_t(_mm_cvtsi128_si32(packed));
        if (CO == 4 || xx + 1 < out_w) {
            std::memcpy(out + xx * CO, &r, 4);  // for CO == 3 the 4th byte is rewritten next
        } else {
            std::memcpy(out + xx * CO, &r, 3);
        }
    }
}

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _undefined_ intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <bool VNNI>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) inline __m512i dot_pairs(__m512i acc, __m512i a,
                                                                                         __m512i b) {
    if constexpr (VNNI) return _mm512_dpwssd_epi32(acc, a, b);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}

// The 128 bytes of a row from byte off: plain loads where the whole window is inside the row
// (masked loads are slower), zeros past its end.
__attribute__((target("avx512f,avx512bw"))) inline void load_window(const uint8_t* in, int64_t row_bytes, int64_t off,
                                                                    __m512i& w0, __m512i& w1) {
    const int64_t avail = row_bytes - off;
    const __mmask64 m0 = avail >= 64 ? ~0ULL : ((1ULL << avail) - 1);
    const __mmask64 m1 = avail >= 128 ? ~0ULL : (avail > 64 ? ((1ULL << (avail - 64)) - 1) : 0);
    w0 = avail >= 64 ? _mm512_loadu_si512(in + off) : _mm512_maskz_loadu_epi8(m0, in + off);
    w1 = avail >= 128 ? _mm512_loadu_si512(in + off + 64) : _mm512_maskz_loadu_epi8(m1, in + off + 64);
}

// One group of 16 output pixels from its window(s); kHalves: pixels 0-7 read the first window
// (w0, w1), pixels 8-15 the second (w2, w3). kPairs: the plan's tap pairs when known at compile
// time (0: pairs); with it fixed the channel and pair loops unroll into independent accumulator
// chains.
// kSingle: one dot product per pair of int16 weights, rounded by rnd and shifted right by sh.
template <int C, int CO, bool VNNI, int kPairs, bool kHalves, bool kSingle>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"))) inline void vbmi_group(
    __m512i w0, __m512i w1, __m512i w2, __m512i w3, const Vec64& offsets, const Vec64* wt, int pairs, __m512i ilv,
    __m512i rnd, __m128i sh, uint8_t* out, int n) {
    const __m512i half = _mm512_set1_epi32(kHalf);
    const __m512i zero = _mm512_setzero_si512();
    constexpr __mmask64 kPair = 0x5555555555555555ULL;  // bytes 0 and 2 of each int32 lane
    constexpr __mmask64 kLow = kPair & 0x00000000FFFFFFFFULL, kHigh = kPair & 0xFFFFFFFF00000000ULL;
    if (kPairs) pairs = kPairs;
    const __m512i idx0 = _mm512_load_si512(offsets.b);
    __m512i ch[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
    for (int c = 0; c < CO; ++c) {
        __m512i lo = zero, hi = zero;
#pragma GCC unroll 8
        for (int q = 0; q < pairs; ++q) {
            const __m512i idx = _mm512_add_epi8(idx0, _mm512_set1_epi8(char(2 * C * q + c)));
            __m512i v;  // int16 pixel pairs
            if constexpr (kHalves) {
                v = _mm512_or_si512(_mm512_maskz_permutex2var_epi8(kLow, w0, idx, w1),
                                    _mm512_maskz_permutex2var_epi8(kHigh, w2, idx, w3));
            } else {
                v = _mm512_maskz_permutex2var_epi8(kPair, w0, idx, w1);
            }
            lo = dot_pairs<VNNI>(lo, v, _mm512_load_si512(wt[2 * q].b));
            if constexpr (!kSingle) hi = dot_pairs<VNNI>(hi, v, _mm512_load_si512(wt[2 * q + 1].b));
        }
        // Pillow's (ss >> 22); clip8's clamp to 0..255 is the two saturating packs below
        // (the shifted sums are far inside int16).
        if constexpr (kSingle) {
            ch[c] = _mm512_sra_epi32(_mm512_add_epi32(lo, rnd), sh);
        } else {
            ch[c] = _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 11), lo), half),
                                      kPrecisionBits);
        }
    }
    const __m512i packed = _mm512_packus_epi16(_mm512_packus_epi32(ch[0], ch[1]), _mm512_packus_epi32(ch[2], ch[3]));
    const __m512i rgb = _mm512_permutexvar_epi8(ilv, packed);
    const __mmask64 store = CO * n >= 64 ? ~0ULL : ((1ULL << (CO * n)) - 1);
    _mm512_mask_storeu_epi8(out, store, rgb);
}

// Tap pair q of a planar group into chain K of every channel's sums (kSingle; else into the
// low and high chains), then idx on to the next pair.
template <int CO, bool VNNI, bool kHalves, bool kSingle, int K>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"), always_inline)) inline void planar_pair(
    const __m512i (*w)[4], __m512i& idx, const Vec64* wt, int q, __m512i (&acc)[4][2]) {
    constexpr __mmask64 kPair = 0x5555555555555555ULL;  // bytes 0 and 2 of each int32 lane
    constexpr __mmask64 kLow = kPair & 0x00000000FFFFFFFFULL, kHigh = kPair & 0xFFFFFFFF00000000ULL;
    const __m512i wq = _mm512_load_si512(wt[2 * q].b);
#pragma GCC unroll 4
    for (int c = 0; c < CO; ++c) {
        __m512i v;  // int16 pixel pairs
        if constexpr (kHalves) {
            v = _mm512_or_si512(_mm512_maskz_permutex2var_epi8(kLow, w[c][0], idx, w[c][1]),
                                _mm512_maskz_permutex2var_epi8(kHigh, w[c][2], idx, w[c][3]));
        } else {
            v = _mm512_maskz_permutex2var_epi8(kPair, w[c][0], idx, w[c][1]);
        }
        if constexpr (kSingle) {
            acc[c][K] = dot_pairs<VNNI>(acc[c][K], v, wq);
        } else {
            acc[c][0] = dot_pairs<VNNI>(acc[c][0], v, wq);
            acc[c][1] = dot_pairs<VNNI>(acc[c][1], v, _mm512_load_si512(wt[2 * q + 1].b));
        }
    }
    idx = _mm512_add_epi8(idx, _mm512_set1_epi8(2));
}

// One group of 16 output pixels from the row's channel planes (windows w[c], offsets in bytes of
// a plane). A tap pair's index vector serves every channel, and each channel sums in two
// independent chains (even and odd pairs, or the split weights' low and high parts), so the
// permutes, not the dot products' latency, bound the loop.
template <int CO, bool VNNI, bool kHalves, bool kSingle>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"))) inline void vbmi_group_planar(
    const __m512i (*w)[4], const Vec64& offsets, const Vec64* wt, int pairs, __m512i ilv, __m512i rnd, __m128i sh,
    uint8_t* out, int n) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i idx = _mm512_load_si512(offsets.b);
    __m512i acc[4][2];
    for (int c = 0; c < 4; ++c) acc[c][0] = acc[c][1] = zero;
    int q = 0;
    for (; q + 2 <= pairs; q += 2) {
        planar_pair<CO, VNNI, kHalves, kSingle, 0>(w, idx, wt, q, acc);
        planar_pair<CO, VNNI, kHalves, kSingle, 1>(w, idx, wt, q + 1, acc);
    }
    if (q < pairs) planar_pair<CO, VNNI, kHalves, kSingle, 0>(w, idx, wt, q, acc);
    __m512i ch[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
    for (int c = 0; c < CO; ++c) {
        if constexpr (kSingle) {
            ch[c] = _mm512_sra_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[c][0], acc[c][1]), rnd), sh);
        } else {
            ch[c] = _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(acc[c][1], 11), acc[c][0]),
                                                       _mm512_set1_epi32(kHalf)),
                                      kPrecisionBits);
        }
    }
    const __m512i packed = _mm512_packus_epi16(_mm512_packus_epi32(ch[0], ch[1]), _mm512_packus_epi32(ch[2], ch[3]));
    const __m512i rgb = _mm512_permutexvar_epi8(ilv, packed);
    const __mmask64 store = CO * n >= 64 ? ~0ULL : ((1ULL << (CO * n)) - 1);
    _mm512_mask_storeu_epi8(out, store, rgb);
}

// Half h's windows (w[c][2h], w[c][2h + 1]) of a group whose source starts at pixel x0: one per
// channel plane (kPlanar), or one in the row's pixels.
template <int C, int kWindows, bool kPlanar>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void load_windows(const uint8_t* in,
                                                                                    const uint8_t* planes, int in_w,
                                                                                    int x0, __m512i (*w)[4], int h) {
    for (int c = 0; c < kWindows; ++c) {
        if constexpr (kPlanar) {
            load_window(planes + int64_t(c) * in_w, in_w, x0, w[c][2 * h], w[c][2 * h + 1]);
        } else {
            load_window(in, int64_t(in_w) * C, int64_t(x0) * C, w[c][2 * h], w[c][2 * h + 1]);
        }
    }
}

// kPlanar: planes holds the row's first CO channels as planes of in_w bytes (deinterleave_row).
template <int C, int CO, bool VNNI, int kPairs, bool kSingle, bool kPlanar>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"))) void horizontal_row_vbmi_impl(
    const uint8_t* in, const uint8_t* planes, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out,
    int out_w) {
    constexpr int kWindows = kPlanar ? CO : 1;
    // The channels' int32 results are narrowed with two saturating packs, which interleave
    // 128-bit lanes: byte 16 * l + 4 * k + j of the packed vector holds channel k, pixel
    // 4 * l + j. One vpermb then puts the pixels' CO channels next to each other.
    alignas(64) uint8_t ilv_b[64];
    for (int i = 0; i < 64; ++i) {
        const int px = i / CO, c = i % CO;
        ilv_b[i] = uint8_t(i < 16 * CO ? 16 * (px / 4) + 4 * c + px % 4 : 0);
    }
    const __m512i ilv = _mm512_load_si512(ilv_b);
    const int sh = kSingle ? kPrecisionBits - plan.shift : kPrecisionBits;
    const __m512i rnd = _mm512_set1_epi32(int32_t(1) << (sh - 1));
    const __m128i shc = _mm_cvtsi32_si128(sh);
    const int groups = (out_w + 15) / 16;
    for (int g = 0; g < groups; ++g) {
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        const Vec64* wt = &plan.weights[size_t(g) * plan.pairs * 2];
        uint8_t* o = out + int64_t(x0) * CO;
        __m512i w[kWindows][4];
        switch (plan.fits[g]) {
            case Fit::Pixels: horizontal_row_sse<C, CO>(in, kn, out, out_w, x0, x0 + n); break;
            case Fit::Whole:
                load_windows<C, kWindows, kPlanar>(in, planes, in_w, plan.base[g], w, 0);
                if constexpr (kPlanar) {
                    vbmi_group_planar<CO, VNNI, false, kSingle>(w, plan.offsets[g], wt, plan.pairs, ilv, rnd, shc, o,
                                                                n);
                } else {
                    vbmi_group<C, CO, VNNI, kPairs, false, kSingle>(w[0][0], w[0][1], w[0][0], w[0][1], plan.offsets[g],
                                                                    wt, plan.pairs, ilv, rnd, shc, o, n);
                }
                break;
            case Fit::Halves:
                load_windows<C, kWindows, kPlanar>(in, planes, in_w, plan.base[g], w, 0);
                load_windows<C, kWindows, kPlanar>(in, planes, in_w, plan.base_hi[g], w, 1);
                if constexpr (kPlanar) {
                    vbmi_group_planar<CO, VNNI, true, kSingle>(w, plan.offsets[g], wt, plan.pairs, ilv, rnd, shc, o, n);
                } else {
                    vbmi_group<C, CO, VNNI, kPairs, true, kSingle>(w[0][0], w[0][1], w[0][2], w[0][3], plan.offsets[g],
                                                                   wt, plan.pairs, ilv, rnd, shc, o, n);
                }
                break;
        }
    }
}

template <int C, int CO, bool VNNI, bool kSingle>
void horizontal_row_vbmi_pairs(const uint8_t* in, const uint8_t* planes, int in_w, const AxisWeights& kn,
                               const VbmiPlan& plan, uint8_t* out, int out_w) {
#define SMG_VBMI(P, PL) horizontal_row_vbmi_impl<C, CO, VNNI, P, kSingle, PL>(in, planes, in_w, kn, plan, out, out_w)
    if (plan.planar) {  // downscales past ~4x: pairs past 8, unrolled or not alike
        SMG_VBMI(0, true);
        return;
    }
    switch (plan.pairs) {  // upscaling: 4 nonzero taps (BICUBIC), 6 (LANCZOS); mild downscaling: 5-8
        case 2: SMG_VBMI(2, false); break;
        case 3: SMG_VBMI(3, false); break;
        case 4: SMG_VBMI(4, false); break;
        case 5: SMG_VBMI(5, false); break;
        default: SMG_VBMI(0, false); break;
    }
#undef SMG_VBMI
}

// The split weights' instance or the single int16 weights' one.
template <int C, int CO, bool VNNI>
void horizontal_row_vbmi_weights(const uint8_t* in, const uint8_t* planes, int in_w, const AxisWeights& kn,
                                 const VbmiPlan& plan, uint8_t* out, int out_w) {
    if (plan.shift >= 0) {
        horizontal_row_vbmi_pairs<C, CO, VNNI, true>(in, planes, in_w, kn, plan, out, out_w);
    } else {
        horizontal_row_vbmi_pairs<C, CO, VNNI, false>(in, planes, in_w, kn, plan, out, out_w);
    }
}

// The row's first CO of C channels as planes of in_w bytes each, 64 pixels per step: channel c's
// bytes gathered from the C vectors of a step by two-source byte permutes.
template <int C, int CO>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void deinterleave_row(const uint8_t* in, int in_w,
                                                                                      uint8_t* planes) {
    static_assert(C == 3 || C == 4, "RGB or RGBX rows");
    __m512i idx[CO];
    __mmask64 upper[CO];  // pixels whose byte lies past the first two vectors
    for (int c = 0; c < CO; ++c) {
        alignas(64) uint8_t idx_b[64];
        upper[c] = 0;
        for (int i = 0; i < 64; ++i) {
            const int at = C * i + c;
            idx_b[i] = uint8_t(at & 127);
            if (at >= 128) upper[c] |= 1ULL << i;
        }
        idx[c] = _mm512_load_si512(idx_b);
    }
    int x = 0;
    for (; x + 64 <= in_w; x += 64) {
        const uint8_t* p = in + int64_t(x) * C;
        __m512i v[C];
        for (int k = 0; k < C; ++k) v[k] = _mm512_loadu_si512(p + 64 * k);
#pragma GCC unroll 4
        for (int c = 0; c < CO; ++c) {
            __m512i r = _mm512_permutex2var_epi8(v[0], idx[c], v[1]);
            if constexpr (C == 4) {
                r = _mm512_mask_blend_epi8(upper[c], r, _mm512_permutex2var_epi8(v[2], idx[c], v[3]));
            } else {
                r = _mm512_mask_permutexvar_epi8(r, upper[c], idx[c], v[2]);  // low 6 bits: at - 128
            }
            _mm512_storeu_si512(planes + int64_t(c) * in_w + x, r);
        }
    }
    for (; x < in_w; ++x)
        for (int c = 0; c < CO; ++c) planes[int64_t(c) * in_w + x] = in[int64_t(x) * C + c];
}

// Rows of 3 or 4 channels through the plan, with VNNI's one-instruction dot products or without.
template <bool VNNI>
void rows_vbmi(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
               int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    const VbmiPlan& p = static_cast<const VbmiPlan&>(plan);
    const int C = src.channels, in_w = src.width;
    std::optional<ScratchBuffer> scratch;  // the row's planes, for planar plans only
    if (p.planar) scratch.emplace(size_t(CO) * in_w);
    uint8_t* planes = p.planar ? scratch->as<uint8_t>() : nullptr;
    // The per-pixel path of groups that do not fit reads one byte past a 3-channel row.
    each_row(src, row0, y0, y1, out, out_stride, C == 3, [&](const uint8_t* in, uint8_t* o) {
        if (C == 4 && CO == 3) {  // RGBX in, RGB out
            if (planes) deinterleave_row<4, 3>(in, in_w, planes);
            horizontal_row_vbmi_weights<4, 3, VNNI>(in, planes, in_w, kn, p, o, out_w);
        } else if (C == 4) {
            if (planes) deinterleave_row<4, 4>(in, in_w, planes);
            horizontal_row_vbmi_weights<4, 4, VNNI>(in, planes, in_w, kn, p, o, out_w);
        } else {
            if (planes) deinterleave_row<3, 3>(in, in_w, planes);
            horizontal_row_vbmi_weights<3, 3, VNNI>(in, planes, in_w, kn, p, o, out_w);
        }
    });
}
#pragma GCC diagnostic pop

}  // namespace

void horizontal_rows_vbmi(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    rows_vbmi<false>(plan, kn, src, row0, y0, y1, out, out_stride, out_w, CO);
}

void horizontal_rows_vnni(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    rows_vbmi<true>(plan, kn, src, row0, y0, y1, out, out_stride, out_w, CO);
}

}  // namespace smg

#endif
