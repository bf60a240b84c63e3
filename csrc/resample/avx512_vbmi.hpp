// The AVX-512 VBMI horizontal plan, made by resample/avx512_vbmi_plan.cpp and read by the row
// kernels of resample/avx512_vbmi.cpp; x86-64 only (SMG_X86).
#pragma once

#include <cstdint>
#include <vector>

#include "resample/kernels.hpp"

namespace smg {

struct alignas(64) Vec64 {
    uint8_t b[64];
};

// The AVX-512 VBMI horizontal plan: 16 output pixels per group, one channel per register.
// How a group of 16 output pixels reads its source: one 128-byte window, one per half (pixels
// 0-7 and 8-15, for downscales whose group spans more), or pixel by pixel.
enum class Fit : uint8_t { Pixels = 0, Whole = 1, Halves = 2 };

struct VbmiPlan : HorizontalPlan {
    int pairs = 0;               // taps rounded up to pairs
    std::vector<int> base;       // first source pixel of each group's window (its first half's)
    std::vector<int> base_hi;    // Halves: first source pixel of the second half's window
    std::vector<Fit> fits;       // how the group reads its source
    std::vector<Vec64> offsets;  // per group: bytes 4i, 4i+2 = S * (start[16g + i] - its base), + S
                                 // (S: C, or 1 in planes)
    std::vector<Vec64> weights;  // per group and tap pair: low, then high int16 weight pairs
    int shift = -1;              // int16_weight_shift: >= 0, the low pairs hold w >> shift alone
    bool planar = false;         // windows (and offsets) in the row's channel planes, not its pixels

    size_t bytes() const override {
        return sizeof(*this) + (base.capacity() + base_hi.capacity()) * sizeof(int) + fits.capacity() +
               (offsets.capacity() + weights.capacity()) * sizeof(Vec64);
    }
};

}  // namespace smg
