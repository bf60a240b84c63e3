// AVX-512 vertical row kernel of the resampler, exact to Pillow's integer sums (F/BW/VL): 64
// output bytes per step in four int32 accumulators (int32 multiplies, or for int16 weights times
// a power of two, torch's, one vpmaddwd per two rows). The horizontal pass's AVX-512 kernels are
// in resample/avx512_vbmi.cpp.
#include "resample/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"

namespace smg {

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

}  // namespace smg

#endif
