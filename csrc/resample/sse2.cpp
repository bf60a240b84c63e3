// The resampler's row kernels in SSE2, part of x86-64 itself (the "baseline" cap's kernels there),
// exact to Pillow's sums through the split weights of resample/fixed.hpp: two taps per pmaddwd.
// Horizontal: one output pixel's channels in the four int32 lanes. Vertical: 16 output bytes per
// step, two source rows' bytes interleaved.
#include "resample/kernels.hpp"

#if SMG_X86
#include <emmintrin.h>

#include <cstring>
#include <vector>

#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"

namespace smg {

namespace {

struct alignas(16) Vec16 {
    int32_t v[4];
};

struct Sse2HPlan : HorizontalPlan {
    int pairs = 0;  // taps rounded up to pairs
    // Per output pixel and tap pair q, hi then lo: the int16 parts of weights 2q (low half of each
    // int32 lane) and 2q + 1 (high half; 0 past the last tap), in all four lanes, as pmaddwd
    // takes them.
    std::vector<Vec16> weights;

    size_t bytes() const override { return sizeof(*this) + weights.capacity() * sizeof(Vec16); }
};

// False when some weight does not split (no real filter's weights fail to).
bool split_weights(const AxisWeights& kn, int out_w, Sse2HPlan& p) {
    const int taps = kn.taps, pairs = (taps + 1) / 2;
    p.pairs = pairs;
    p.weights.assign(size_t(out_w) * pairs * 2, Vec16{});
    for (int x = 0; x < out_w; ++x) {
        for (int j = 0; j < taps; ++j) {
            int16_t lo, hi;
            if (!split_weight(kn.weights[size_t(x) * taps + j], lo, hi)) return false;
            const int shift = 16 * (j % 2);
            Vec16* pair = &p.weights[(size_t(x) * pairs + j / 2) * 2];
            for (int l = 0; l < 4; ++l) {
                pair[0].v[l] = int32_t(uint32_t(pair[0].v[l]) | (uint32_t(uint16_t(hi)) << shift));
                pair[1].v[l] = int32_t(uint32_t(pair[1].v[l]) | (uint32_t(uint16_t(lo)) << shift));
            }
        }
    }
    return true;
}

// One row of CI (3 or 4) channel pixels into out_w pixels of CO (CI, or 3 from 4). Reads 4 bytes
// per source pixel: for CI == 3 one byte past the row's last pixel, which must be readable.
template <int CI, int CO>
void row_sse2(const uint8_t* in, const AxisWeights& kn, const Sse2HPlan& p, uint8_t* out, int out_w) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i half = _mm_set1_epi32(kHalf);
    const int taps = kn.taps, pairs = p.pairs;
    auto load4 = [](const uint8_t* s) {
        int32_t v;
        std::memcpy(&v, s, 4);
        return _mm_cvtsi32_si128(v);
    };
    for (int x = 0; x < out_w; ++x) {
        const uint8_t* px = in + int64_t(kn.start[x]) * CI;
        const __m128i* w = reinterpret_cast<const __m128i*>(&p.weights[size_t(x) * pairs * 2]);
        __m128i sh = zero, sl = zero;
        for (int q = 0; q < pairs; ++q) {
            // Taps 2q and 2q + 1 as int16 pairs per channel; an odd last tap pairs with itself
            // (its partner's weight is 0), so nothing past the window is read.
            const int j = 2 * q, j1 = j + 1 < taps ? j + 1 : j;
            const __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi8(load4(px + j * CI), load4(px + j1 * CI)), zero);
            sh = _mm_add_epi32(sh, _mm_madd_epi16(v, _mm_load_si128(w + 2 * q)));
            sl = _mm_add_epi32(sl, _mm_madd_epi16(v, _mm_load_si128(w + 2 * q + 1)));
        }
        __m128i ss = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(sh, kSplitBits), sl), half);
        ss = _mm_srai_epi32(ss, kPrecisionBits);
        // clip8's clamp is the two saturating packs.
        const uint32_t r = uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(ss, zero), zero)));
        if (CO == 4 || x + 1 < out_w) {
            std::memcpy(out + x * CO, &r, 4);  // for CO == 3 the 4th byte is rewritten next
        } else {
            std::memcpy(out + x * CO, &r, 3);
        }
    }
}

// out[x] = clip(sum_j row_j[x] * k[j]), row_j = first + j * stride, for x from 0 up to the value
// returned (a multiple of 16, at most len; 0 when a weight does not split or there are more than
// 128 taps): the caller does the rest.
int vertical_steps(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    constexpr int kMaxPairs = 64;
    const int pairs = (taps + 1) / 2;
    if (pairs > kMaxPairs || len < 16) return 0;
    __m128i whi[kMaxPairs], wlo[kMaxPairs];
    for (int q = 0; q < pairs; ++q) {
        int16_t lo0, hi0, lo1 = 0, hi1 = 0;
        if (!split_weight(k[2 * q], lo0, hi0)) return 0;
        if (2 * q + 1 < taps && !split_weight(k[2 * q + 1], lo1, hi1)) return 0;
        whi[q] = _mm_set1_epi32(int32_t(uint32_t(uint16_t(hi0)) | (uint32_t(uint16_t(hi1)) << 16)));
        wlo[q] = _mm_set1_epi32(int32_t(uint32_t(uint16_t(lo0)) | (uint32_t(uint16_t(lo1)) << 16)));
    }
    const __m128i zero = _mm_setzero_si128();
    const __m128i half = _mm_set1_epi32(kHalf);
    int x = 0;
    for (; x + 16 <= len; x += 16) {
        // Accumulators: byte groups 0-3, 4-7, 8-11, 12-15, each as hi and lo sums.
        __m128i sh[4] = {zero, zero, zero, zero}, sl[4] = {zero, zero, zero, zero};
        for (int q = 0; q < pairs; ++q) {
            const int j = 2 * q, j1 = j + 1 < taps ? j + 1 : j;  // an odd last tap pairs with itself
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + j * stride + x));
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + j1 * stride + x));
            const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
            const __m128i v[4] = {_mm_unpacklo_epi8(ab_lo, zero), _mm_unpackhi_epi8(ab_lo, zero),
                                  _mm_unpacklo_epi8(ab_hi, zero), _mm_unpackhi_epi8(ab_hi, zero)};
            for (int g = 0; g < 4; ++g) {
                sh[g] = _mm_add_epi32(sh[g], _mm_madd_epi16(v[g], whi[q]));
                sl[g] = _mm_add_epi32(sl[g], _mm_madd_epi16(v[g], wlo[q]));
            }
        }
        __m128i r[4];
        for (int g = 0; g < 4; ++g)
            r[g] = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(sh[g], kSplitBits), sl[g]), half),
                                  kPrecisionBits);
        // clip8's clamp is the two saturating packs.
        const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(r[0], r[1]), _mm_packs_epi32(r[2], r[3]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), bytes);
    }
    return x;
}

}  // namespace

// 16-byte SSE2 steps (pmaddwd on split weights), the portable loop for the rest.
void vertical_row_sse2(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    const int done = vertical_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}

std::unique_ptr<HorizontalPlan> horizontal_plan_sse2(const AxisWeights& kn, int, int out_w, int C, int) {
    if (C < 3) return nullptr;
    auto p = std::make_unique<Sse2HPlan>();
    if (!split_weights(kn, out_w, *p)) return nullptr;
    return p;
}

void horizontal_rows_sse2(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    const Sse2HPlan& p = static_cast<const Sse2HPlan&>(plan);
    const int CI = src.channels;
    each_row(src, row0, y0, y1, out, out_stride, CI == 3, [&](const uint8_t* in, uint8_t* o) {
        if (CI == 3) {
            row_sse2<3, 3>(in, kn, p, o, out_w);
        } else if (CO == 3) {
            row_sse2<4, 3>(in, kn, p, o, out_w);
        } else {
            row_sse2<4, 4>(in, kn, p, o, out_w);
        }
    });
}

}  // namespace smg

#endif
