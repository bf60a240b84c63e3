// Pillow's fixed-point resampling arithmetic for 8-bit images, shared by every row kernel: each
// output value is clip8(2^21 + sum(pixel * weight)) with 22-bit weights.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace smg {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images
constexpr int32_t kHalf = int32_t(1) << (kPrecisionBits - 1);

inline uint8_t clip8(int32_t ss) {
    const int32_t v = ss >> kPrecisionBits;
    return uint8_t(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// The SIMD kernels multiply 16-bit pixels by 16-bit weights, too narrow for 22-bit weights, so
// each weight is split exactly as w = hi * 2^kSplitBits + lo (lo in [0, 2^kSplitBits), hi in
// int16) and the two dot products are recombined as (sum_hi << kSplitBits) + sum_lo: the same
// int32 sum Pillow computes (wrapping alike, were it to wrap).
constexpr int kSplitBits = 11;

// False when hi does not fit in int16 (no real kernel comes close).
inline bool split_weight(int32_t w, int16_t& lo, int16_t& hi) {
    const int32_t h = w >> kSplitBits;  // arithmetic shift: w = h * 2^11 + (w & 2047)
    lo = int16_t(w & ((1 << kSplitBits) - 1));
    hi = int16_t(h);
    return h >= -32768 && h <= 32767;
}

// The n weights k[0..n) as int16 values times 2^s (torch's are): the largest such s up to
// kPrecisionBits - 1 (every weight a multiple of 2^s: the trailing zeros they share), or -1 when
// some weight divided by 2^s leaves int16.
inline int int16_shift(const int32_t* k, size_t n) {
    uint32_t bits = 0;
    for (size_t j = 0; j < n; ++j) bits |= uint32_t(k[j]);
    const int s = bits == 0 ? kPrecisionBits - 1 : std::min(__builtin_ctz(bits), kPrecisionBits - 1);
    for (size_t j = 0; j < n; ++j) {
        const int32_t q = k[j] >> s;  // exact: a multiple of 2^s
        if (q < -32768 || q > 32767) return -1;
    }
    return s;
}

}  // namespace smg
