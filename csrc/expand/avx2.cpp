// The AVX2 expansion kernel: vpgatherdd, 8 values a gather. 4-byte values are gathered as they
// are; 2-byte ones as the dword at each value (the value and the next one's bytes, or the 2 bytes
// readable past the table), masked to 16 bits and packed to words.
#include "expand/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

namespace smg {

namespace {

#define SMG_AVX2 __attribute__((target("avx2")))

SMG_AVX2 inline __m256i widen(const uint8_t* c) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c)));
}

}  // namespace

// Whole steps of 16, then the last 16 codes again when there are that many (rewriting values
// already written with the same ones), else the portable kernel for the few.
SMG_AVX2 void expand16_avx2(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out) {
    if (len < 16) return expand16_scalar(codes, len, t, out);
    const int* base = static_cast<const int*>(t.values);
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    auto step = [&](int64_t j) SMG_AVX2 {
        const __m256i a = _mm256_and_si256(_mm256_i32gather_epi32(base, widen(codes + j), 2), low);
        const __m256i b = _mm256_and_si256(_mm256_i32gather_epi32(base, widen(codes + j + 8), 2), low);
        // packus interleaves the halves by 128-bit lane: a0-3 b0-3 a4-7 b4-7; put them in order
        const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), w);
    };
    int64_t j = 0;
    for (; j + 16 <= len; j += 16) step(j);
    if (j < len) step(len - 16);
}

SMG_AVX2 void expand32_avx2(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out) {
    if (len < 16) return expand32_scalar(codes, len, t, out);
    const int* base = static_cast<const int*>(t.values);
    auto step = [&](int64_t j) SMG_AVX2 {
        const __m256i a = _mm256_i32gather_epi32(base, widen(codes + j), 4);
        const __m256i b = _mm256_i32gather_epi32(base, widen(codes + j + 8), 4);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), a);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j + 8), b);
    };
    int64_t j = 0;
    for (; j + 16 <= len; j += 16) step(j);
    if (j < len) step(len - 16);
}

}  // namespace smg

#endif  // SMG_X86
