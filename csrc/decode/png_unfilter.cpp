#include "decode/png_unfilter.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "cpu.hpp"

#if SMG_X86
#include <emmintrin.h>  // SSE2: part of x86-64 itself, so no dispatch
#endif

namespace smg {

namespace {

inline uint8_t paeth(int a, int b, int c) {
    // p = a + b - c; the distances from p to a, b and c, ties going to a, then b. Written as
    // selects so the compiler emits conditional moves: the branches mispredict on photos.
    const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
    const int bc = pb <= pc ? b : c;
    return uint8_t(pa <= pb && pa <= pc ? a : bc);
}

#if SMG_X86
// Paeth on one row of 3- or 4-byte pixels, a pixel per step in 16-bit lanes: the chain through
// the previous pixel (a) is the whole cost, so the channels go side by side. Each step loads and
// stores 4 bytes; for 3-byte pixels the 4th lane is left as it was (predictor 0), and the last
// pixel, whose 4th byte may lie past the buffer, is done by the scalar code.
template <int kBpp>
int64_t paeth_sse2(uint8_t* cur, const uint8_t* prev, int64_t n) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i keep = kBpp == 3 ? _mm_setr_epi16(-1, -1, -1, 0, 0, 0, 0, 0) : _mm_set1_epi16(-1);
    auto load4 = [&](const uint8_t* p) {
        int32_t v;
        std::memcpy(&v, p, 4);
        return _mm_unpacklo_epi8(_mm_cvtsi32_si128(v), zero);
    };
    auto absval = [&](__m128i v) { return _mm_max_epi16(v, _mm_sub_epi16(zero, v)); };
    auto blend = [](__m128i mask, __m128i yes, __m128i no) {
        return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
    };
    __m128i a = _mm_and_si128(load4(cur), keep);  // pixel 0, already undone by the caller
    __m128i c = _mm_and_si128(load4(prev), keep);
    int64_t i = kBpp;
    if (i + 4 > n) return i;
    // The next pixel's filtered bytes are loaded before this pixel is stored: a load that
    // overlaps the 4-byte store just made (3-byte pixels) would wait for it.
    __m128i x = load4(cur + i);
    for (; i + 4 <= n; i += kBpp) {
        const __m128i b = _mm_and_si128(load4(prev + i), keep);
        const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
        const __m128i pa = absval(bc), pb = absval(ac), pc = absval(_mm_add_epi16(bc, ac));
        const __m128i pbc = blend(_mm_cmpgt_epi16(pb, pc), c, b);  // b unless pc < pb
        const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
        const __m128i out = _mm_and_si128(_mm_add_epi16(x, blend(not_a, pbc, a)), _mm_set1_epi16(0xff));
        if (i + kBpp + 4 <= n) x = load4(cur + i + kBpp);
        const int32_t v = _mm_cvtsi128_si32(_mm_packus_epi16(out, zero));
        std::memcpy(cur + i, &v, 4);
        a = _mm_and_si128(out, keep);
        c = b;
    }
    return i;  // the first byte not done
}
#endif

// One row; prev is the previous row's unfiltered bytes, or null on the first row (all zero).
// kBpp > 0 fixes the bytes per pixel at compile time so the channel loops unroll.
template <int kBpp>
bool unfilter_row(uint8_t* cur, const uint8_t* prev, int64_t n, int bpp_rt, int type) {
    const int64_t bpp = kBpp ? kBpp : bpp_rt;
    switch (type) {
        case 0: return true;
        case 1:
            for (int64_t i = bpp; i < n; ++i) cur[i] = uint8_t(cur[i] + cur[i - bpp]);
            return true;
        case 2:
            if (prev)
                for (int64_t i = 0; i < n; ++i) cur[i] = uint8_t(cur[i] + prev[i]);
            return true;
        case 3:
            if (!prev) {
                for (int64_t i = bpp; i < n; ++i) cur[i] = uint8_t(cur[i] + (cur[i - bpp] >> 1));
                return true;
            }
            for (int64_t i = 0; i < bpp && i < n; ++i) cur[i] = uint8_t(cur[i] + (prev[i] >> 1));
            for (int64_t i = bpp; i < n; ++i) cur[i] = uint8_t(cur[i] + ((cur[i - bpp] + prev[i]) >> 1));
            return true;
        case 4:
            if (!prev) {  // b = c = 0: the predictor is a, as for Sub
                for (int64_t i = bpp; i < n; ++i) cur[i] = uint8_t(cur[i] + cur[i - bpp]);
                return true;
            }
            for (int64_t i = 0; i < bpp && i < n; ++i) cur[i] = uint8_t(cur[i] + prev[i]);  // a = c = 0
            {
                int64_t i = bpp;
#if SMG_X86
                if constexpr (kBpp == 3 || kBpp == 4)
                    if (n > kBpp) i = paeth_sse2<kBpp>(cur, prev, n);
#endif
                for (; i < n; ++i)  // the channels of a pixel are independent chains
                    cur[i] = uint8_t(cur[i] + paeth(cur[i - bpp], prev[i], prev[i - bpp]));
            }
            return true;
        default: return false;
    }
}

template <int kBpp>
bool unfilter_rows(uint8_t* data, int64_t height, int64_t row_bytes, int bpp) {
    const int64_t pitch = row_bytes + 1;
    for (int64_t y = 0; y < height; ++y) {
        uint8_t* row = data + y * pitch;
        const uint8_t* prev = y ? row - pitch + 1 : nullptr;
        if (!unfilter_row<kBpp>(row + 1, prev, row_bytes, bpp, row[0])) return false;
    }
    return true;
}

}  // namespace

bool png_unfilter(uint8_t* data, int64_t size, int64_t height, int64_t row_bytes, int bpp) {
    if (height < 1 || row_bytes < 1 || bpp < 1 || bpp > 8 || row_bytes > (int64_t(1) << 40) / height)
        throw std::invalid_argument("png_unfilter: bad height, row_bytes or bpp");
    if (size < height * (row_bytes + 1))
        throw std::invalid_argument("png_unfilter: data is shorter than height * (row_bytes + 1)");
    switch (bpp) {
        case 1: return unfilter_rows<1>(data, height, row_bytes, bpp);
        case 3: return unfilter_rows<3>(data, height, row_bytes, bpp);
        case 4: return unfilter_rows<4>(data, height, row_bytes, bpp);
        default: return unfilter_rows<0>(data, height, row_bytes, bpp);
    }
}

}  // namespace smg
