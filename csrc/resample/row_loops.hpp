// Loops the resampler's row kernels share (internal to resample/*.cpp): the portable vertical loop
// every vertical kernel finishes a row with, and the walk over source rows that gives a kernel
// reading one byte past a 3-channel row a padded copy where no row follows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "image.hpp"
#include "resample/fixed.hpp"
#include "scratch.hpp"

namespace smg {

// out[x] = clip8(2^21 + sum_j row_j[x] * k[j]). Inlined into each instruction set's vertical
// kernel so that the compiler vectorizes it for that set (an ifunc's choice, as with
// target_clones, would ignore the SMG_FAST_ISA cap).
__attribute__((always_inline)) inline void vertical_row_body(const uint8_t* first, int64_t stride, const int32_t* k,
                                                             int taps, uint8_t* out, int len) {
    constexpr int kChunk = 512;  // accumulators stay in L1
    int32_t acc[kChunk];
    for (int x0 = 0; x0 < len; x0 += kChunk) {
        const int m = std::min(kChunk, len - x0);
        for (int i = 0; i < m; ++i) acc[i] = kHalf;
        for (int j = 0; j < taps; ++j) {
            const uint8_t* r = first + j * stride + x0;
            const int32_t kj = k[j];
            for (int i = 0; i < m; ++i) acc[i] += int32_t(r[i]) * kj;
        }
        for (int i = 0; i < m; ++i) {
            const int32_t v = acc[i] >> kPrecisionBits;
            out[x0 + i] = uint8_t(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
}

// The vertical weights of one output row as int16 values times 2^s (torch's): s (at most
// kPrecisionBits - 1), or -1 when they are not. A kernel then takes two rows per vpmaddwd and
// computes (sum + 2^(21 - s)) >> (22 - s), which is Pillow's (sum * 2^s + 2^21) >> 22.
inline int row_int16_shift(const int32_t* k, int taps) { return int16_shift(k, size_t(taps)); }

// row(in, out) for source rows [row0 + y0, row0 + y1) of src and out rows [0, y1 - y0). With
// pad_last, a kernel that reads 4 bytes per 3-byte pixel (one past the row) gets, for a source
// row that no other row follows, a copy with slack: reading past a row is safe only when another
// row follows (stride slack need not follow the last row: a view that skips bytes before each
// row ends with its last pixel).
template <class RowFn>
inline void each_row(const ImageView& src, int row0, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride,
                     bool pad_last, RowFn&& row) {
    for (int64_t y = y0; y < y1; ++y) {
        const int64_t sy = row0 + y;
        const uint8_t* in = src.data + sy * src.stride;
        uint8_t* o = out + (y - y0) * out_stride;
        if (pad_last && sy + 1 >= src.height) {
            ScratchBuffer pad(size_t(src.width) * 3 + 16);
            std::memcpy(pad.as<uint8_t>(), in, size_t(src.width) * 3);
            row(pad.as<const uint8_t>(), o);
        } else {
            row(in, o);
        }
    }
}

}  // namespace smg
