#include "resample/avx2.hpp"

#include <algorithm>
#include <cstring>

#include "cpu.hpp"
#include "resample/fixed.hpp"

#if SMG_X86
#include <immintrin.h>
#endif

namespace smg {

namespace {

// One layout's plan; unfit_bytes: output bytes left to the per-byte path.
Avx2HPlan plan_layout(const AxisWeights& kn, int in_w, int out_w, int C, int CO, bool pixels, bool shared,
                      int64_t& unfit_bytes) {
    Avx2HPlan p;
    p.pixels = pixels;
    p.shared = shared;
    p.C = C;
    p.CO = CO;
    p.pairs = (kn.taps + 1) / 2;
    const int taps = kn.taps;
    const int64_t n_out = int64_t(out_w) * CO;
    const int chunk_out = pixels ? 8 * CO : 32;
    p.chunks = int((n_out + chunk_out - 1) / chunk_out);
    const size_t groups = size_t(p.chunks) * 4;
    p.base.assign(groups * 2, 0);
    p.masks.assign(groups, Vec32{});
    p.weights.assign(groups * p.pairs * 2, Vec32{});
    p.fits.assign(p.chunks, 0);
    p.row_bytes = int64_t(in_w) * C;
    // The highest base whose loads (16 bytes at base + 2 * q * C) all stay inside the row; a
    // chunk with a higher base (or a narrow row's empty half at 0) reads the padded tail copy.
    const int64_t last_base = p.row_bytes - 16 - int64_t(2) * (p.pairs - 1) * C;
    unfit_bytes = 0;
    for (int k = 0; k < p.chunks; ++k) {
        bool fits = true, tail = last_base < 0;
        for (int j = 0; j < 4 && fits; ++j) {
            const size_t g = size_t(k) * 4 + j;
            // Slot 4h + l of the group: its output pixel x (-1: none) and channel c.
            int x[8], c[8];
            int64_t a[8];
            for (int s = 0; s < 8; ++s) {
                if (pixels) {
                    x[s] = 8 * k + 2 * j + s / 4;
                    c[s] = s % 4;
                    if (x[s] >= out_w || c[s] >= CO) x[s] = -1;
                } else {
                    const int64_t b = int64_t(32) * k + 8 * j + s;
                    x[s] = b < n_out ? int(b / CO) : -1;
                    c[s] = int(b % CO);
                }
                a[s] = x[s] < 0 ? -1 : int64_t(C) * kn.start[x[s]] + c[s];
            }
            // Each half's window (or, shared, one for both): every slot's two bytes
            // a - base and a - base + C within its 16 bytes.
            for (int h = 0; h < 2; ++h) {
                const int s0 = shared ? 0 : 4 * h, s1 = shared ? 8 : 4 * h + 4;
                int64_t amin = INT64_MAX, amax = INT64_MIN;
                for (int s = s0; s < s1; ++s) {
                    if (x[s] < 0) continue;
                    amin = std::min(amin, a[s]);
                    amax = std::max(amax, a[s]);
                }
                if (amin == INT64_MAX) continue;  // past the row's end: zero mask and weights
                // Any base in [amax + C - 15, amin] holds the slots; the lowest within the row's
                // loads, else the lowest at all (the fewest bytes past the row's end).
                const int64_t base = std::max({std::min(amin, last_base), amax + C - 15, int64_t(0)});
                if (base > amin) {
                    fits = false;
                    break;
                }
                if (base > last_base) tail = true;
                p.base[2 * g + h] = int32_t(base);
                if (shared) p.base[2 * g + 1] = int32_t(base);
                for (int s = s0; s < s1; ++s) {
                    uint8_t* m = p.masks[g].b + 4 * s;
                    if (x[s] < 0) {
                        std::memset(m, 0x80, 4);  // 0x80: vpshufb writes zero
                        continue;
                    }
                    const uint8_t pair[4] = {uint8_t(a[s] - base), 0x80, uint8_t(a[s] - base + C), 0x80};
                    std::memcpy(m, pair, 4);
                    const int32_t* w = &kn.weights[size_t(x[s]) * taps];
                    for (int t = 0; t < taps; ++t) {
                        int16_t lo, hi;
                        if (!split_weight(w[t], lo, hi)) fits = false;
                        Vec32* wq = &p.weights[(g * p.pairs + t / 2) * 2];
                        std::memcpy(&wq[0].b[4 * s + 2 * (t % 2)], &lo, 2);
                        std::memcpy(&wq[1].b[4 * s + 2 * (t % 2)], &hi, 2);
                    }
                }
                if (shared) break;
            }
        }
        p.fits[k] = fits ? (tail ? 2 : 1) : 0;
        if (fits && tail) p.tail = true;
        if (!fits) unfit_bytes += std::min<int64_t>(chunk_out, n_out - int64_t(k) * chunk_out);
    }
    return p;
}

}  // namespace

Avx2HPlan make_avx2_hplan(const AxisWeights& kn, int in_w, int out_w, int C, int CO) {
    // Cheapest first: one window per group (one load per tap pair, no insert) where a group's 8
    // output bytes read within 16 source bytes (upscaling and mild downscaling); else one per
    // half; else, for 3 output channels, whole pixels (one per half, 4/3 the work for a lane
    // thrown away). A layout is taken when it leaves at most the row's edge to the per-byte path
    // (~10x slower per byte).
    const int64_t n = int64_t(out_w) * CO;
    int64_t unfit = 0;
    Avx2HPlan best = plan_layout(kn, in_w, out_w, C, CO, false, true, unfit);
    if (unfit <= 64) return best;
    double best_cost = double(n - unfit) + 10.0 * unfit;
    for (const bool pixels : {false, true}) {
        if (pixels && CO == 4) break;  // the same slots as packed
        Avx2HPlan p = plan_layout(kn, in_w, out_w, C, CO, pixels, false, unfit);
        const double cost = (pixels ? 4.0 / 3.0 : 1.1) * double(n - unfit) + 10.0 * unfit;
        if (cost < best_cost) {
            best = std::move(p);
            best_cost = cost;
        }
        if (unfit <= 64) break;
    }
    return best;
}

#if SMG_X86

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
template <int C, int CO, bool kPixels, bool kShared, int kPairs, bool kTail>
__attribute__((target("avx2"))) inline void hchunk_avx2(const uint8_t* in, int64_t in_stride, const Avx2HPlan& p,
                                                        uint8_t* out, int64_t out_stride, int64_t n_out, int k,
                                                        int rows, const uint8_t (*tails)[32], int64_t last_load,
                                                        int64_t tail_off) {
    constexpr int kChunkOut = kPixels ? 8 * CO : 32;
    const int pairs = kPairs ? kPairs : p.pairs;
    const __m256i half = _mm256_set1_epi32(kHalf);
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
                    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
                }
                for (int q = qs; q < pairs; ++q) {
                    const int64_t f0 = b0 + 2 * q * C, f1 = b1 + 2 * q * C;
                    const uint8_t* a0 = f0 <= last_load ? row + f0 : tails[y] + (f0 - tail_off);
                    const uint8_t* a1 = f1 <= last_load ? row + f1 : tails[y] + (f1 - tail_off);
                    const __m256i v = _mm256_shuffle_epi8(window<kShared>(a0, a1), mask);
                    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(v, load32(w[2 * q])));
                    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
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
                    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, load32(w[2 * q + 1])));
                }
            }
            // Pillow's ss >> 22; clip8's clamp is the two saturating packs below.
            r[j] = _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), kPrecisionBits);
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
template <int C, int CO, bool kPixels, bool kShared, int kPairs>
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
            hchunk_avx2<C, CO, kPixels, kShared, kPairs, false>(in, in_stride, p, out, out_stride, n_out, k, rows,
                                                                tails, last_load, tail_off);
        } else if (p.fits[k] == 2) {
            hchunk_avx2<C, CO, kPixels, kShared, kPairs, true>(in, in_stride, p, out, out_stride, n_out, k, rows, tails,
                                                               last_load, tail_off);
        } else {
            const int64_t o0 = int64_t(k) * kChunkOut, o1 = std::min(n_out, o0 + kChunkOut);
            for (int y = 0; y < rows; ++y) hbytes_scalar<C, CO>(in + y * in_stride, kn, out + y * out_stride, o0, o1);
        }
    }
}

template <int C, int CO, bool kPixels, bool kShared>
void hrows_avx2_pairs(const uint8_t* in, int64_t in_stride, const AxisWeights& kn, const Avx2HPlan& p, uint8_t* out,
                      int64_t out_stride, int out_w, int rows) {
    switch (p.pairs) {  // upscaling: 2 (BICUBIC), 1 (BILINEAR), 3 (LANCZOS); mild downscaling: 3-4
        case 1: hrows_avx2<C, CO, kPixels, kShared, 1>(in, in_stride, kn, p, out, out_stride, out_w, rows); break;
        case 2: hrows_avx2<C, CO, kPixels, kShared, 2>(in, in_stride, kn, p, out, out_stride, out_w, rows); break;
        case 3: hrows_avx2<C, CO, kPixels, kShared, 3>(in, in_stride, kn, p, out, out_stride, out_w, rows); break;
        case 4: hrows_avx2<C, CO, kPixels, kShared, 4>(in, in_stride, kn, p, out, out_stride, out_w, rows); break;
        default: hrows_avx2<C, CO, kPixels, kShared, 0>(in, in_stride, kn, p, out, out_stride, out_w, rows); break;
    }
}

}  // namespace

void horizontal_rows_avx2(const uint8_t* in, int64_t in_stride, const AxisWeights& kn, const Avx2HPlan& p, uint8_t* out,
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

// 64 output bytes per step in 8 int32 accumulators, one vpmulld per 8 bytes and tap: measured
// ~10% faster here than vpmaddwd over row pairs with the weight split (whose byte interleaving
// costs more shuffles than the multiplies it saves).
__attribute__((target("avx2"))) int vertical_row_avx2_steps(const uint8_t* first, int64_t stride, const int32_t* k,
                                                            int taps, uint8_t* out, int len) {
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

#endif

}  // namespace smg
