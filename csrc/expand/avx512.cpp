// The AVX-512 VBMI expansion kernel. A channel's 256-entry byte plane is four registers; vpermi2b
// looks 64 codes up in two of them by the codes' low 7 bits, and bit 7 (vpmovb2m) blends the
// halves. The codes are first permuted within the register so that the in-lane unpacks which
// interleave the planes into words (and words into dwords) leave every value in order.
#include "expand/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

namespace smg {

namespace {

#define SMG_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

struct Perm {
    alignas(64) uint8_t b[64];
};

// 2-byte values: unpacklo / unpackhi of the two planes put the codes at bytes 16k .. 16k + 7 of
// each lane k, then those at 16k + 8 .. 16k + 15, into the two 32-value halves; so byte
// 16k + 8q + j takes code 32q + 8k + j.
constexpr Perm perm16() {
    Perm p{};
    for (int k = 0; k < 4; ++k)
        for (int q = 0; q < 2; ++q)
            for (int j = 0; j < 8; ++j) p.b[16 * k + 8 * q + j] = uint8_t(32 * q + 8 * k + j);
    return p;
}

// 4-byte values: two rounds of unpacks (bytes to words, words to dwords) leave a quarter of each
// lane in each of the four 16-value outputs; byte 16k + 4q + j takes code 16q + 4k + j.
constexpr Perm perm32() {
    Perm p{};
    for (int k = 0; k < 4; ++k)
        for (int q = 0; q < 4; ++q)
            for (int j = 0; j < 4; ++j) p.b[16 * k + 4 * q + j] = uint8_t(16 * q + 4 * k + j);
    return p;
}

constexpr Perm kPerm16 = perm16();
constexpr Perm kPerm32 = perm32();

struct Plane {
    __m512i q[4];  // entries 0-63, 64-127, 128-191, 192-255
};

SMG_VBMI inline Plane load_plane(const uint8_t* p) {
    return {{_mm512_load_si512(p), _mm512_load_si512(p + 64), _mm512_load_si512(p + 128), _mm512_load_si512(p + 192)}};
}

// The plane's bytes for 64 codes; hi: the codes with bit 7 set.
SMG_VBMI inline __m512i lookup(const Plane& t, __m512i c, __mmask64 hi) {
    const __m512i a = _mm512_permutex2var_epi8(t.q[0], c, t.q[1]);
    const __m512i b = _mm512_permutex2var_epi8(t.q[2], c, t.q[3]);
    return _mm512_mask_blend_epi8(hi, a, b);
}

// 64 codes (or the first len < 64 of them: masked loads and stores).
template <bool kMasked>
SMG_VBMI inline void step16(const uint8_t* c, uint16_t* o, const Plane& lo, const Plane& hi, __m512i perm, int len) {
    const __mmask64 k = kMasked ? (uint64_t(1) << len) - 1 : ~uint64_t(0);
    const __m512i raw = kMasked ? _mm512_maskz_loadu_epi8(k, c) : _mm512_loadu_si512(c);
    const __m512i x = _mm512_maskz_permutexvar_epi8(~uint64_t(0), perm, raw);  // (the unmasked form trips GCC 12)
    const __mmask64 top = _mm512_movepi8_mask(x);
    const __m512i l = lookup(lo, x, top), h = lookup(hi, x, top);
    const __m512i w0 = _mm512_unpacklo_epi8(l, h), w1 = _mm512_unpackhi_epi8(l, h);
    if (kMasked) {
        _mm512_mask_storeu_epi16(o, __mmask32(k), w0);
        _mm512_mask_storeu_epi16(o + 32, __mmask32(k >> 32), w1);
    } else {
        _mm512_storeu_si512(o, w0);
        _mm512_storeu_si512(o + 32, w1);
    }
}

template <bool kMasked>
SMG_VBMI inline void step32(const uint8_t* c, uint32_t* o, const Plane (&t)[4], __m512i perm, int len) {
    const __mmask64 k = kMasked ? (uint64_t(1) << len) - 1 : ~uint64_t(0);
    const __m512i raw = kMasked ? _mm512_maskz_loadu_epi8(k, c) : _mm512_loadu_si512(c);
    const __m512i x = _mm512_maskz_permutexvar_epi8(~uint64_t(0), perm, raw);  // (the unmasked form trips GCC 12)
    const __mmask64 top = _mm512_movepi8_mask(x);
    const __m512i b0 = lookup(t[0], x, top), b1 = lookup(t[1], x, top);
    const __m512i b2 = lookup(t[2], x, top), b3 = lookup(t[3], x, top);
    const __m512i w0 = _mm512_unpacklo_epi8(b0, b1), w1 = _mm512_unpackhi_epi8(b0, b1);
    const __m512i x0 = _mm512_unpacklo_epi8(b2, b3), x1 = _mm512_unpackhi_epi8(b2, b3);
    const __m512i d[4] = {_mm512_unpacklo_epi16(w0, x0), _mm512_unpackhi_epi16(w0, x0), _mm512_unpacklo_epi16(w1, x1),
                          _mm512_unpackhi_epi16(w1, x1)};
    for (int q = 0; q < 4; ++q) {
        if (kMasked)
            _mm512_mask_storeu_epi32(o + 16 * q, __mmask16(k >> (16 * q)), d[q]);
        else
            _mm512_storeu_si512(o + 16 * q, d[q]);
    }
}

}  // namespace

// Whole steps, then the last 64 codes again when there are that many (rewriting values already
// written with the same ones), else one masked step.
SMG_VBMI void expand16_avx512(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out) {
    const Plane lo = load_plane(t.planes), hi = load_plane(t.planes + 256);
    const __m512i perm = _mm512_load_si512(kPerm16.b);
    int64_t j = 0;
    for (; j + 64 <= len; j += 64) step16<false>(codes + j, out + j, lo, hi, perm, 64);
    if (j == len) return;
    if (len >= 64)
        step16<false>(codes + len - 64, out + len - 64, lo, hi, perm, 64);
    else
        step16<true>(codes, out, lo, hi, perm, int(len));
}

SMG_VBMI void expand32_avx512(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out) {
    const Plane p[4] = {load_plane(t.planes), load_plane(t.planes + 256), load_plane(t.planes + 512),
                        load_plane(t.planes + 768)};
    const __m512i perm = _mm512_load_si512(kPerm32.b);
    int64_t j = 0;
    for (; j + 64 <= len; j += 64) step32<false>(codes + j, out + j, p, perm, 64);
    if (j == len) return;
    if (len >= 64)
        step32<false>(codes + len - 64, out + len - 64, p, perm, 64);
    else
        step32<true>(codes, out, p, perm, int(len));
}

}  // namespace smg

#endif  // SMG_X86
