// AVX2 row kernels of the resampler, exact to Pillow's integer sums. Horizontal: Pillow's 22-bit
// weights are too wide for 16-bit multiplies, so each is split exactly as k = hi * 2^11 + lo (lo
// in [0, 2^11), hi in int16) and two vpmaddwd dot products over int16 pixel pairs are recombined
// as (sum_hi << 11) + sum_lo: the same int32 sum Pillow computes (wrapping alike, were it to
// wrap); weights that are int16 values times a power of two (torch's) take one vpmaddwd.
// Vertical: int32 multiplies, the sum as Pillow writes it (or, for torch's weights, one vpmaddwd
// per two rows).
// The horizontal plan shared by resample/avx2_plan.cpp (which makes it) and resample/avx2.cpp
// (which reads it); x86-64 only (SMG_X86).
#pragma once

#include <cstdint>
#include <vector>

#include "resample/kernels.hpp"

namespace smg {

struct alignas(32) Vec32 {
    uint8_t b[32];
};

// The horizontal pass in chunks of 32 int32 slots (4 groups of 8, one ymm each), one output byte
// per slot: tap pair q of a slot reads two source bytes from a 16-byte window at base + 2 * q * C,
// placed as an int16 pair by one vpshufb. A chunk "fits" when every slot's bytes lie within its
// window; loads that would run past the row's end (narrow rows, right-edge chunks with an odd tap
// count) read a zero-padded copy of the row's last 16 bytes instead (only zero weights fall
// there). Chunks that do not fit are computed per pixel, as Pillow does.
struct Avx2HPlan : HorizontalPlan {
    // Slot 4h + l of group j of chunk k (128-bit half h, int32 lane l) is output byte
    // 32k + 8j + 4h + l (packed), or channel l of output pixel 8k + 2j + h (pixels: 3 output
    // channels, lane 3 unused, where the strong downscales put a half's bytes more than 16 apart).
    bool pixels = false;
    bool shared = false;  // one window for both halves of a group (a broadcast load)
    int C = 0, CO = 0;    // source and output channels
    int pairs = 0;        // taps rounded up to pairs
    int chunks = 0;
    int64_t row_bytes = 0;       // in_w * C
    bool tail = false;           // some chunk has fits == 2
    std::vector<int32_t> base;   // per half (8 per chunk): byte offset in the row of pair 0's load
    std::vector<Vec32> masks;    // per group: vpshufb control, bytes 4s, 4s+2 = slot s's sources
    std::vector<Vec32> weights;  // per group and pair: (lo, lo) then (hi, hi) int16 pairs per slot
    std::vector<uint8_t> fits;   // per chunk: 0 no, 1 yes, 2 yes with loads past the row's end
    int shift = -1;              // int16_weight_shift: >= 0, the (lo, lo) pairs hold w >> shift alone

    size_t bytes() const override {
        return sizeof(*this) + base.capacity() * sizeof(int32_t) +
               (masks.capacity() + weights.capacity()) * sizeof(Vec32) + fits.capacity();
    }
};

}  // namespace smg
