// AVX-512 row kernels of the resampler, exact to Pillow's integer sums. Vertical (F/BW/VL): 64
// output bytes per step in four int32 accumulators (int32 multiplies, or for int16 weights times
// a power of two, torch's, one vpmaddwd per two rows). Horizontal (VBMI, RGB and RGBX): 16 output
// pixels per group, one channel per register; the source pixels a group reads lie in a 128-byte
// window, or each half's in its own (checked per group when planning), so each tap pair is one
// vpermi2b (two, for halves) that drops the right bytes into every int32 lane, and two dot
// products of the split weights (resample/fixed.hpp): vpmaddwd + vpaddd, or one VNNI vpdpwssd.
// Weights that are int16 values times a power of two (torch's) take one dot product per pair.
#include "resample/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"

namespace smg {

namespace {

struct alignas(64) Vec64 {
    uint8_t b[64];
};

// The AVX-512 VBMI horizontal plan: 16 output pixels per group, one channel per register.
// How a group of 16 output pixels reads its source: one 128-byte window, one per half (pixels
// 0-7 and 8-15, for downscales whose group spans more), or pixel by pixel.
enum class Fit : uint8_t { Pixels = 0, Whole = 1, Halves = 2 };

struct VbmiPlan : HorizontalPlan {
    int pairs = 0;               // taps rounded up to pairs
    std::vector<int> base;       // first source pixel of each group's window (its first half's)
    std::vector<int> base_hi;    // Halves: first source pixel of the second half's window
    std::vector<Fit> fits;       // how the group reads its source
    std::vector<Vec64> offsets;  // per group: bytes 4i, 4i+2 = C * (start[16g + i] - its base), + C
    std::vector<Vec64> weights;  // per group and tap pair: low, then high int16 weight pairs
    int shift = -1;              // int16_weight_shift: >= 0, the low pairs hold w >> shift alone
};

}  // namespace

// 64 output bytes per step in four int32 accumulators, the portable loop for the rest.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 header false positive
#pragma GCC diagnostic ignored "-Wuninitialized"
// clip8 on 16 lanes: shift, clamp below at 0, saturate above at 255 while narrowing.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m128i clip8_x16(__m512i v) {
    return _mm512_cvtusepi32_epi8(_mm512_max_epi32(_mm512_srai_epi32(v, kPrecisionBits), _mm512_setzero_si512()));
}

// Weights w16 * 2^s: two rows' bytes interleaved as int16 pairs, one vpmaddwd per tap pair and
// 16 bytes; (sum + 2^(21 - s)) >> (22 - s) is Pillow's (sum * 2^s + 2^21) >> 22. The unpacks and
// the packs both work within 128-bit lanes, so the bytes come back in order. Returns the bytes
// done (whole 64-byte steps).
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int vertical_steps_int16(const uint8_t* first,
                                                                                     int64_t stride, const int32_t* k,
                                                                                     int taps, int s, uint8_t* out,
                                                                                     int len) {
    const int sh = kPrecisionBits - s;
    const __m512i rnd = _mm512_set1_epi32(int32_t(1) << (sh - 1));
    const __m128i shc = _mm_cvtsi32_si128(sh);
    const __m512i zero = _mm512_setzero_si512();
    int x = 0;
    for (; x + 64 <= len; x += 64) {
        __m512i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        const uint8_t* r = first + x;
        for (int j = 0; j < taps; j += 2, r += 2 * stride) {
            const bool pair = j + 1 < taps;  // an odd last tap pairs its row with itself, weight 0
            const uint32_t w0 = uint16_t(k[j] >> s), w1 = pair ? uint16_t(k[j + 1] >> s) : 0;
            const __m512i w = _mm512_set1_epi32(int32_t(w0 | (w1 << 16)));
            const __m512i p = _mm512_loadu_si512(r);
            const __m512i q = pair ? _mm512_loadu_si512(r + stride) : p;
            const __m512i lo = _mm512_unpacklo_epi8(p, q), hi = _mm512_unpackhi_epi8(p, q);
            a0 = _mm512_add_epi32(a0, _mm512_madd_epi16(_mm512_unpacklo_epi8(lo, zero), w));
            a1 = _mm512_add_epi32(a1, _mm512_madd_epi16(_mm512_unpackhi_epi8(lo, zero), w));
            a2 = _mm512_add_epi32(a2, _mm512_madd_epi16(_mm512_unpacklo_epi8(hi, zero), w));
            a3 = _mm512_add_epi32(a3, _mm512_madd_epi16(_mm512_unpackhi_epi8(hi, zero), w));
        }
        // clip8's clamp is the two saturating packs
        const __m512i p01 = _mm512_packs_epi32(_mm512_sra_epi32(a0, shc), _mm512_sra_epi32(a1, shc));
        const __m512i p23 = _mm512_packs_epi32(_mm512_sra_epi32(a2, shc), _mm512_sra_epi32(a3, shc));
        _mm512_storeu_si512(out + x, _mm512_packus_epi16(p01, p23));
    }
    return x;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void vertical_row_avx512(const uint8_t* first, int64_t stride,
                                                                              const int32_t* k, int taps, uint8_t* out,
                                                                              int len) {
    const __m512i half = _mm512_set1_epi32(kHalf);
    const int s = row_int16_shift(k, taps);
    int x = s >= 0 ? vertical_steps_int16(first, stride, k, taps, s, out, len) : 0;
    for (; x + 64 <= len; x += 64) {
        __m512i a0 = half, a1 = half, a2 = half, a3 = half;
        const uint8_t* r = first + x;
        for (int j = 0; j < taps; ++j, r += stride) {
            const __m512i kj = _mm512_set1_epi32(k[j]);
            a0 = _mm512_add_epi32(a0,
                                  _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r))), kj));
            a1 = _mm512_add_epi32(
                a1, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 16))), kj));
            a2 = _mm512_add_epi32(
                a2, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 32))), kj));
            a3 = _mm512_add_epi32(
                a3, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 48))), kj));
        }
        _mm_storeu_si128((__m128i*)(out + x), clip8_x16(a0));
        _mm_storeu_si128((__m128i*)(out + x + 16), clip8_x16(a1));
        _mm_storeu_si128((__m128i*)(out + x + 32), clip8_x16(a2));
        _mm_storeu_si128((__m128i*)(out + x + 48), clip8_x16(a3));
    }
    if (x < len) vertical_row_body(first + x, stride, k, taps, out + x, len - x);
}

#pragma GCC diagnostic pop

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

template <int C, int CO, bool VNNI, int kPairs, bool kSingle>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"))) void horizontal_row_vbmi_impl(
    const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out, int out_w) {
    const int64_t row_bytes = int64_t(in_w) * C;
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
        __m512i w0, w1;
        switch (plan.fits[g]) {
            case Fit::Pixels: horizontal_row_sse<C, CO>(in, kn, out, out_w, x0, x0 + n); break;
            case Fit::Whole:
                load_window(in, row_bytes, int64_t(plan.base[g]) * C, w0, w1);
                vbmi_group<C, CO, VNNI, kPairs, false, kSingle>(w0, w1, w0, w1, plan.offsets[g], wt, plan.pairs, ilv,
                                                                rnd, shc, o, n);
                break;
            case Fit::Halves: {
                __m512i w2, w3;
                load_window(in, row_bytes, int64_t(plan.base[g]) * C, w0, w1);
                load_window(in, row_bytes, int64_t(plan.base_hi[g]) * C, w2, w3);
                vbmi_group<C, CO, VNNI, kPairs, true, kSingle>(w0, w1, w2, w3, plan.offsets[g], wt, plan.pairs, ilv,
                                                               rnd, shc, o, n);
                break;
            }
        }
    }
}

template <int C, int CO, bool VNNI, bool kSingle>
void horizontal_row_vbmi_pairs(const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out,
                               int out_w) {
    switch (plan.pairs) {  // upscaling: 4 nonzero taps (BICUBIC), 6 (LANCZOS); mild downscaling: 5-8
        case 2: horizontal_row_vbmi_impl<C, CO, VNNI, 2, kSingle>(in, in_w, kn, plan, out, out_w); break;
        case 3: horizontal_row_vbmi_impl<C, CO, VNNI, 3, kSingle>(in, in_w, kn, plan, out, out_w); break;
        case 4: horizontal_row_vbmi_impl<C, CO, VNNI, 4, kSingle>(in, in_w, kn, plan, out, out_w); break;
        case 5: horizontal_row_vbmi_impl<C, CO, VNNI, 5, kSingle>(in, in_w, kn, plan, out, out_w); break;
        default: horizontal_row_vbmi_impl<C, CO, VNNI, 0, kSingle>(in, in_w, kn, plan, out, out_w); break;
    }
}

// The split weights' instance or the single int16 weights' one.
template <int C, int CO, bool VNNI>
void horizontal_row_vbmi_weights(const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out,
                                 int out_w) {
    if (plan.shift >= 0) {
        horizontal_row_vbmi_pairs<C, CO, VNNI, true>(in, in_w, kn, plan, out, out_w);
    } else {
        horizontal_row_vbmi_pairs<C, CO, VNNI, false>(in, in_w, kn, plan, out, out_w);
    }
}

// Rows of 3 or 4 channels through the plan, with VNNI's one-instruction dot products or without.
template <bool VNNI>
void rows_vbmi(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
               int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    const VbmiPlan& p = static_cast<const VbmiPlan&>(plan);
    const int C = src.channels, in_w = src.width;
    // The per-pixel path of groups that do not fit reads one byte past a 3-channel row.
    each_row(src, row0, y0, y1, out, out_stride, C == 3, [&](const uint8_t* in, uint8_t* o) {
        if (C == 4 && CO == 3) {  // RGBX in, RGB out
            horizontal_row_vbmi_weights<4, 3, VNNI>(in, in_w, kn, p, o, out_w);
        } else if (C == 4) {
            horizontal_row_vbmi_weights<4, 4, VNNI>(in, in_w, kn, p, o, out_w);
        } else {
            horizontal_row_vbmi_weights<3, 3, VNNI>(in, in_w, kn, p, o, out_w);
        }
    });
}
#pragma GCC diagnostic pop

// The window of output pixels [x0, x0 + n): its first source pixel, and whether every tap of
// those pixels lies in the 128 bytes from there.
std::pair<int, bool> window(const AxisWeights& kn, int x0, int n, int C) {
    // Trimmed windows (see AxisWeights) need not start in increasing order.
    const auto [lo, hi] = std::minmax_element(kn.start.begin() + x0, kn.start.begin() + x0 + n);
    return {*lo, (*hi - *lo + kn.taps) * C <= 128};
}

// How each group of 16 output pixels reads its source, and from where: p's pairs, base, base_hi
// and fits. Returns the number of groups left to the per-pixel path.
int classify_groups(const AxisWeights& kn, int out_w, int C, VbmiPlan& p) {
    const int groups = (out_w + 15) / 16;
    p.pairs = (kn.taps + 1) / 2;
    p.base.assign(groups, 0);
    p.base_hi.assign(groups, 0);
    p.fits.assign(groups, Fit::Pixels);
    int pixels = 0;
    for (int g = 0; g < groups; ++g) {
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        const auto [base, whole] = window(kn, x0, n, C);
        p.base[g] = p.base_hi[g] = base;
        if (whole) {
            p.fits[g] = Fit::Whole;
        } else if (n > 8) {
            const auto [base_lo, lo_fits] = window(kn, x0, 8, C);
            const auto [base_hi, hi_fits] = window(kn, x0 + 8, n - 8, C);
            if (lo_fits && hi_fits) {
                p.fits[g] = Fit::Halves;
                p.base[g] = base_lo;
                p.base_hi[g] = base_hi;
            }
        }
        pixels += p.fits[g] == Fit::Pixels;
    }
    return pixels;
}

// The vpermi2b offsets and the split weights of every group classify_groups placed in windows.
void fill_vbmi_plan(const AxisWeights& kn, int out_w, VbmiPlan& p, int C) {
    const int groups = int(p.fits.size()), taps = kn.taps;
    p.offsets.assign(groups, Vec64{});
    p.weights.assign(size_t(groups) * p.pairs * 2, Vec64{});
    for (int g = 0; g < groups; ++g) {
        if (p.fits[g] == Fit::Pixels) continue;
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        for (int i = 0; i < n; ++i) {
            const int off = C * (kn.start[x0 + i] - (i < 8 ? p.base[g] : p.base_hi[g]));
            p.offsets[g].b[4 * i] = uint8_t(off);
            p.offsets[g].b[4 * i + 2] = uint8_t(off + C);
            for (int j = 0; j < taps; ++j) {
                const int32_t w = kn.weights[size_t(x0 + i) * taps + j];
                int16_t lo = int16_t(w & 2047), hi = int16_t(w >> 11);
                if (p.shift >= 0) {  // the int16 weight alone (exact: w is a multiple of 2^shift)
                    lo = int16_t(w / (int32_t(1) << p.shift));
                    hi = 0;
                }
                Vec64* pair = &p.weights[(size_t(g) * p.pairs + j / 2) * 2];
                std::memcpy(&pair[0].b[4 * i + 2 * (j % 2)], &lo, 2);
                std::memcpy(&pair[1].b[4 * i + 2 * (j % 2)], &hi, 2);
            }
        }
    }
}

}  // namespace

std::unique_ptr<HorizontalPlan> horizontal_plan_vbmi(const AxisWeights& kn, int, int out_w, int C, int) {
    if (C < 3) return nullptr;
    auto p = std::make_unique<VbmiPlan>();
    // Groups whose halves' windows exceed 128 bytes each (downscales past ~4x in RGB, ~3x in
    // RGBX) take the per-pixel path, several times slower than the AVX2 kernel's layouts: past
    // one group in 16, the next kernel of the table takes the resize (decided before the weights
    // are laid out).
    const int pixels = classify_groups(kn, out_w, C, *p);
    if (int64_t(pixels) * 16 > int64_t(p->fits.size())) return nullptr;
    p->shift = int16_weight_shift(kn);
    // Without the int16 form every weight must split (|w| < 2^26; no real filter's comes close).
    int16_t lo, hi;
    if (p->shift < 0)
        for (const int32_t w : kn.weights)
            if (!split_weight(w, lo, hi)) return nullptr;
    fill_vbmi_plan(kn, out_w, *p, C);
    return p;
}

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
