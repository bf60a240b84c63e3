// AVX2 row kernels of the resampler, exact to Pillow's integer sums (see resample/avx2.hpp for the
// horizontal pass's split weights; vertically, int32 multiplies with the sum as Pillow writes it or
// the split weights' vpmaddwd over row pairs, two kernels the tuner times; for torch's int16
// weights one vpmaddwd per two rows in both).
#include "resample/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "resample/avx2.hpp"
#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"

namespace smg {

namespace {

// Output bytes [b0, b1) of a row (chunks the plan does not fit), per pixel as Pillow computes
// them: the pixels covering the bytes into a small buffer, then the bytes asked for.
template <int C, int CO>
void hbytes_scalar(const uint8_t* in, const AxisWeights& kn, uint8_t* out, int64_t b0, int64_t b1) {
    const int taps = kn.taps;
    const int64_t x0 = b0 / CO, x1 = (b1 - 1) / CO + 1;
    uint8_t px[(32 / CO + 2) * CO];
    for (int64_t x = x0; x < x1; ++x) {
        const uint8_t* p = in + int64_t(kn.start[x]) * C;
        const int32_t* k = &kn.weights[size_t(x) * taps];
        int32_t ss[CO];
        for (int c = 0; c < CO; ++c) ss[c] = kHalf;
        for (int j = 0; j < taps; ++j)
            for (int c = 0; c < CO; ++c) ss[c] += int32_t(p[j * C + c]) * k[j];
        for (int c = 0; c < CO; ++c) px[(x - x0) * CO + c] = clip8(ss[c]);
    }
    std::memcpy(out + b0, px + (b0 - x0 * CO), size_t(b1 - b0));
}

__attribute__((target("avx2"))) inline __m256i load32(const Vec32& v) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(v.b));
}

// A group's window for one tap pair: 16 bytes at a0 in both halves (shared), or at a0 | a1.
template <bool kShared>
__attribute__((target("avx2"))) inline __m256i window(const uint8_t* a0, const uint8_t* a1) {
    const __m128i w0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a0));
    if constexpr (kShared) {
        (void)a1;
        return _mm256_broadcastsi128_si256(w0);
    } else {
        return _mm256_inserti128_si256(_mm256_castsi128_si256(w0),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(a1)), 1);
    }
}

// Chunk k of the rows (fits != 0). kTail: loads from offset last_load on run past the row's end
// and read tails[y] instead, a zero-padded copy of the row's bytes from tail_off on (a load
// starts at most 1 byte before the end); a separate instance, so the common one has no test.
// kSingle: one vpmaddwd per pair of int16 weights, the sums shifted right by 22 - p.shift.
template <int C, int CO, bool kPixels, bool kShared, int kPairs, bool kTail, bool kSingle>
__attribute__((target("avx2"))) inline void hchunk_avx2(const uint8_t* in, int64_t in_stride, const Avx2HPlan& p,
                                                        uint8_t* out, int64_t out_stride, int64_t n_out, int k,
                                                        int rows, const uint8_t (*tails)[32], int64_t last_load,
                                                        int64_t tail_off) {
    constexpr int kChunkOut = kPixels ? 8 * CO : 32;
    const int pairs = kPairs ? kPairs : p.pairs;
    const int sh = kSingle ? kPrecisionBits - p.shift : kPrecisionBits;
    const __m256i half = _mm256_set1_epi32(int32_t(1) << (sh - 1));
    const __m128i shc = _mm_cvtsi32_si128(sh);
    // Group j holds chunk slots 8j..8j+7 (4 per half); after the packs the halves hold slots
    // 0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31: one vpermd restores the order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    // pixels with 3 channels: drop lane 3 of each pixel, then close the gap between the halves
    const __m256i compact = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                             0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m256i close_gap = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    const int64_t o0 = int64_t(k) * kChunkOut;
    const int64_t o1 = std::min(n_out, o0 + kChunkOut);
    for (int y = 0; y < rows; ++y) {
        const uint8_t* row = in + y * in_stride;
        __m256i r[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const size_t g = size_t(k) * 4 + j;
            const __m256i mask = load32(p.masks[g]);
            const Vec32* w = &p.weights[g * pairs * 2];
            __m256i lo = half, hi = _mm256_setzero_si256();
            if constexpr (kTail) {
                const int64_t b0 = p.base[2 * g], b1 = p.base[2 * g + 1];
                // pairs below qs load inside the row (only the last few run past it)
                const int64_t top_base = std::max(b0, b1);
                const int qs =
                    top_base > last_load ? 0 : int(std::min<int64_t>(pairs, (last_load - top_base) / (2 * C) + 1));
                for (int q = 0; q < qs; ++q) {
                    const __m256i v =
                        _mm256_shuffle_epi8(window<kShared>(row + b0 + 2 * q * C, row + b1 + 2 * q * C), mask);
                    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, load32(w[2 * q])));
                    if constexpr (!kSingle) hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
                }
                for (int q = qs; q < pairs; ++q) {
                    const int64_t f0 = b0 + 2 * q * C, f1 = b1 + 2 * q * C;
                    const uint8_t* a0 = f0 <= last_load ? row + f0 : tails[y] + (f0 - tail_off);
                    const uint8_t* a1 = f1 <= last_load ? row + f1 : tails[y] + (f1 - tail_off);
                    const __m256i v = _mm256_shuffle_epi8(window<kShared>(a0, a1), mask);
                    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, load32(w[2 * q])));
                    if constexpr (!kSingle) hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
                }
            } else {
                (void)tails;
                (void)last_load;
                (void)tail_off;
                const uint8_t* a0 = row + p.base[2 * g];
                const uint8_t* a1 = row + p.base[2 * g + 1];
#pragma GCC unroll 8
                for (int q = 0; q < pairs; ++q) {
                    const __m256i v = _mm256_shuffle_epi8(window<kShared>(a0 + 2 * q * C, a1 + 2 * q * C), mask);
                    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, load32(w[2 * q])));
                    if constexpr (!kSingle) hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
                }
            }
            // Pillow's ss >> 22; clip8's clamp is the two saturating packs below.
            if constexpr (kSingle) {
                r[j] = _mm256_sra_epi32(lo, shc);
            } else {
                r[j] = _mm256_sra_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), shc);
            }
        }
        __m256i b = _mm256_permutevar8x32_epi32(
            _mm256_packus_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3])), order);
        if (kPixels && CO == 3) b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(b, compact), close_gap);
        uint8_t* o = out + y * out_stride;
        if (o0 + 32 <= n_out) {
            // for pixels with 3 channels the last 8 bytes belong to the next chunk, written later
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + o0), b);
        } else {
            alignas(32) uint8_t tmp[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), b);
            std::memcpy(o + o0, tmp, size_t(o1 - o0));
        }
    }
}

// Rows in the inner loop: a chunk's plan (weights, masks) is read from L2 once and from L1 for
// the other rows.
template <int C, int CO, bool kPixels, bool kShared, int kPairs, bool kSingle>
__attribute__((target("avx2"))) void hrows_avx2(const uint8_t* in, int64_t in_stride, const AxisWeights& kn,
                                                const Avx2HPlan& p, uint8_t* out, int64_t out_stride, int out_w,
                                                int rows) {
    const int64_t n_out = int64_t(out_w) * CO;
    constexpr int kChunkOut = kPixels ? 8 * CO : 32;
    const int64_t last_load = p.row_bytes - 16, tail_off = std::max<int64_t>(0, last_load);
    alignas(32) uint8_t tails[4][32];
    if (p.tail) {
        for (int y = 0; y < rows; ++y) {
            std::memset(tails[y], 0, 32);
            std::memcpy(tails[y], in + y * in_stride + tail_off, size_t(p.row_bytes - tail_off));
        }
    }
    for (int k = 0; k < p.chunks; ++k) {
        if (p.fits[k] == 1) {
            hchunk_avx2<C, CO, kPixels, kShared, kPairs, false, kSingle>(in, in_stride, p, out, out_stride, n_out, k,
                                                                         rows, tails, last_load, tail_off);
        } else if (p.fits[k] == 2) {
            hchunk_avx2<C, CO, kPixels, kShared, kPairs, true, kSingle>(in, in_stride, p, out, out_stride, n_out, k,
                                                                        rows, tails, last_load, tail_off);
        } else {
            const int64_t o0 = int64_t(k) * kChunkOut, o1 = std::min(n_out, o0 + kChunkOut);
            for (int y = 0; y < rows; ++y) hbytes_scalar<C, CO>(in + y * in_stride, kn, out + y * out_stride, o0, o1);
        }
    }
}

template <int C, int CO, bool kPixels, bool kShared, bool kSingle>
void hrows_avx2_weights(const uint8_t* in, int64_t in_stride, const AxisWeights& kn, const Avx2HPlan& p, uint8_t* out,
                        int64_t out_stride, int out_w, int rows) {
#define SMG_HPAIRS(N) \
    hrows_avx2<C, CO, kPixels, kShared, N, kSingle>(in, in_stride, kn, p, out, out_stride, out_w, rows)
    switch (p.pairs) {  // upscaling: 2 (BICUBIC), 1 (BILINEAR), 3 (LANCZOS); mild downscaling: 3-4
        case 1: SMG_HPAIRS(1); break;
        case 2: SMG_HPAIRS(2); break;
        case 3: SMG_HPAIRS(3); break;
        case 4: SMG_HPAIRS(4); break;
        default: SMG_HPAIRS(0); break;
    }
#undef SMG_HPAIRS
}

// The split weights' instances or the single int16 weights' ones.
template <int C, int CO, bool kPixels, bool kShared>
void hrows_avx2_pairs(const uint8_t* in, int64_t in_stride, const AxisWeights& kn, const Avx2HPlan& p, uint8_t* out,
                      int64_t out_stride, int out_w, int rows) {
    if (p.shift >= 0) {
        hrows_avx2_weights<C, CO, kPixels, kShared, true>(in, in_stride, kn, p, out, out_stride, out_w, rows);
    } else {
        hrows_avx2_weights<C, CO, kPixels, kShared, false>(in, in_stride, kn, p, out, out_stride, out_w, rows);
    }
}

// Up to 4 rows, in + y * in_stride to out + y * out_stride (one read of each chunk's plan from L2).
void rows4(const uint8_t* in, int64_t in_stride, const AxisWeights& kn, const Avx2HPlan& p, uint8_t* out,
           int64_t out_stride, int out_w, int rows) {
#define SMG_HROWS(C, CO, PX, SH) hrows_avx2_pairs<C, CO, PX, SH>(in, in_stride, kn, p, out, out_stride, out_w, rows)
    if (p.C == 4 && p.CO == 4) {
        if (p.shared) {
            SMG_HROWS(4, 4, false, true);
        } else {
            SMG_HROWS(4, 4, false, false);
        }
    } else if (p.C == 4) {
        if (p.shared) {
            SMG_HROWS(4, 3, false, true);
        } else if (p.pixels) {
            SMG_HROWS(4, 3, true, false);
        } else {
            SMG_HROWS(4, 3, false, false);
        }
    } else if (p.shared) {
        SMG_HROWS(3, 3, false, true);
    } else if (p.pixels) {
        SMG_HROWS(3, 3, true, false);
    } else {
        SMG_HROWS(3, 3, false, false);
    }
#undef SMG_HROWS
}

// 64 output bytes per step in 8 int32 accumulators, one vpmulld per 8 bytes and tap: ~10% faster
// than vpmaddwd over row pairs with the weight split (vertical_steps_split, whose byte interleaving
// costs more shuffles than the multiplies it saves) where vpmulld runs at full width.
__attribute__((target("avx2"))) int vertical_steps(const uint8_t* first, int64_t stride, const int32_t* k, int taps,
                                                   uint8_t* out, int len) {
    const __m256i half = _mm256_set1_epi32(kHalf);
    // after the packs the halves hold bytes 0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int x = 0;
    for (; x + 64 <= len; x += 64) {
        __m256i a[8];
        for (__m256i& v : a) v = half;
        const uint8_t* r = first + x;
        for (int j = 0; j < taps; ++j, r += stride) {
            const __m256i kj = _mm256_set1_epi32(k[j]);
#pragma GCC unroll 8
            for (int i = 0; i < 8; ++i) {
                const __m256i px = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + 8 * i)));
                a[i] = _mm256_add_epi32(a[i], _mm256_mullo_epi32(px, kj));
            }
        }
        // Pillow's ss >> 22; clip8's clamp is the two saturating packs.
        for (__m256i& v : a) v = _mm256_srai_epi32(v, kPrecisionBits);
        for (int h = 0; h < 2; ++h) {
            const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a[4 * h], a[4 * h + 1]),
                                                  _mm256_packs_epi32(a[4 * h + 2], a[4 * h + 3]));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x + 32 * h), _mm256_permutevar8x32_epi32(b, order));
        }
    }
    return x;
}

// Weights w16 * 2^s (row_int16_shift): two rows' bytes interleaved as int16 pairs, one vpmaddwd
// per tap pair and 8 bytes; the unpacks and the packs both work within 128-bit lanes, so the
// bytes come back in order. Returns the bytes done (whole 32-byte steps).
__attribute__((target("avx2"))) int vertical_steps_int16(const uint8_t* first, int64_t stride, const int32_t* k,
                                                         int taps, int s, uint8_t* out, int len) {
    const int sh = kPrecisionBits - s;
    const __m256i rnd = _mm256_set1_epi32(int32_t(1) << (sh - 1));
    const __m128i shc = _mm_cvtsi32_si128(sh);
    const __m256i zero = _mm256_setzero_si256();
    int x = 0;
    for (; x + 32 <= len; x += 32) {
        __m256i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        const uint8_t* r = first + x;
        for (int j = 0; j < taps; j += 2, r += 2 * stride) {
            const bool pair = j + 1 < taps;  // an odd last tap pairs its row with itself, weight 0
            const uint32_t w0 = uint16_t(k[j] >> s), w1 = pair ? uint16_t(k[j + 1] >> s) : 0;
            const __m256i w = _mm256_set1_epi32(int32_t(w0 | (w1 << 16)));
            const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r));
            const __m256i q = pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + stride)) : p;
            const __m256i lo = _mm256_unpacklo_epi8(p, q), hi = _mm256_unpackhi_epi8(p, q);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), w));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), w));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), w));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), w));
        }
        // clip8's clamp is the two saturating packs
        const __m256i p01 = _mm256_packs_epi32(_mm256_sra_epi32(a0, shc), _mm256_sra_epi32(a1, shc));
        const __m256i p23 = _mm256_packs_epi32(_mm256_sra_epi32(a2, shc), _mm256_sra_epi32(a3, shc));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), _mm256_packus_epi16(p01, p23));
    }
    return x;
}

// Pillow's weights split as k = hi * 2^11 + lo (fixed.hpp), two rows' bytes interleaved as int16
// pairs, two vpmaddwd per tap pair and 8 bytes, recombined as (sum_hi << 11) + sum_lo + 2^21: the
// same int32 sum, modulo 2^32 at every step, so exact for any window. The alternative to
// vertical_steps for hosts where 32-bit multiplies are slow (first-generation Zen runs 256-bit
// vpmulld at half width). Returns the bytes done (whole 32-byte steps; 0 for windows
// past 128 taps or a weight that does not split).
__attribute__((target("avx2"))) int vertical_steps_split(const uint8_t* first, int64_t stride, const int32_t* k,
                                                         int taps, uint8_t* out, int len) {
    constexpr int kMaxPairs = kVerticalMaddMaxTaps / 2;
    const int pairs = (taps + 1) / 2;
    if (pairs > kMaxPairs) return 0;
    __m256i wlo[kMaxPairs], whi[kMaxPairs];
    for (int q = 0; q < pairs; ++q) {
        int16_t lo0, hi0, lo1 = 0, hi1 = 0;  // an odd last tap pairs its row with itself, weight 0
        if (!split_weight(k[2 * q], lo0, hi0)) return 0;
        if (2 * q + 1 < taps && !split_weight(k[2 * q + 1], lo1, hi1)) return 0;
        wlo[q] = _mm256_set1_epi32(int32_t(uint32_t(uint16_t(lo0)) | (uint32_t(uint16_t(lo1)) << 16)));
        whi[q] = _mm256_set1_epi32(int32_t(uint32_t(uint16_t(hi0)) | (uint32_t(uint16_t(hi1)) << 16)));
    }
    const __m256i half = _mm256_set1_epi32(kHalf);
    const __m256i zero = _mm256_setzero_si256();
    int x = 0;
    for (; x + 32 <= len; x += 32) {
        __m256i lo[4] = {zero, zero, zero, zero}, hi[4] = {zero, zero, zero, zero};
        const uint8_t* r = first + x;
        for (int q = 0; q < pairs; ++q, r += 2 * stride) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r));
            const __m256i b = 2 * q + 1 < taps ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + stride)) : a;
            const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
            const __m256i v[4] = {_mm256_unpacklo_epi8(ab_lo, zero), _mm256_unpackhi_epi8(ab_lo, zero),
                                  _mm256_unpacklo_epi8(ab_hi, zero), _mm256_unpackhi_epi8(ab_hi, zero)};
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) {
                lo[g] = _mm256_add_epi32(lo[g], _mm256_madd_epi16(v[g], wlo[q]));
                hi[g] = _mm256_add_epi32(hi[g], _mm256_madd_epi16(v[g], whi[q]));
            }
        }
        __m256i s[4];
        for (int g = 0; g < 4; ++g)
            s[g] = _mm256_srai_epi32(
                _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi[g], kSplitBits), lo[g]), half), kPrecisionBits);
        // The unpacks and the packs both work within 128-bit lanes: the bytes come back in order;
        // clip8's clamp is the two saturating packs.
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x),
                            _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[1]), _mm256_packs_epi32(s[2], s[3])));
    }
    return x;
}

// Rows the horizontal kernel takes together.
constexpr int kRows = 4;

}  // namespace

// Register-blocked steps (int16 pairs for torch's weights, else int32 multiplies), the compiler's
// AVX2 loop for the rest.
__attribute__((target("avx2"))) void vertical_row_avx2(const uint8_t* first, int64_t stride, const int32_t* k, int taps,
                                                       uint8_t* out, int len) {
    const int s = row_int16_shift(k, taps);
    const int done = s >= 0 ? vertical_steps_int16(first, stride, k, taps, s, out, len)
                            : vertical_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}

// The same rows with Pillow's weights through the split (vertical_steps_split) instead of vpmulld.
__attribute__((target("avx2"))) void vertical_row_avx2_madd(const uint8_t* first, int64_t stride, const int32_t* k,
                                                            int taps, uint8_t* out, int len) {
    const int s = row_int16_shift(k, taps);
    int done = s >= 0 ? vertical_steps_int16(first, stride, k, taps, s, out, len)
                      : vertical_steps_split(first, stride, k, taps, out, len);
    if (s < 0 && done == 0) done = vertical_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}

void horizontal_rows_avx2(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int) {
    const Avx2HPlan& p = static_cast<const Avx2HPlan&>(plan);
    for (int64_t y = y0; y < y1; y += kRows) {  // reads only the rows' bytes
        const int n = int(std::min<int64_t>(kRows, y1 - y));
        rows4(src.data + (row0 + y) * src.stride, src.stride, kn, p, out + (y - y0) * out_stride, out_stride, out_w, n);
    }
}

}  // namespace smg

#endif
