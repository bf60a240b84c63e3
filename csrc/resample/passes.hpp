// Row kernels of the resampler: the vertical and horizontal passes over ranges of rows (scalar,
// AVX2 and AVX-512 versions picked at run time), the VBMI horizontal plan, and NEAREST's tables.
// Internal to resample/resizer.cpp; the public API is resample/resizer.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "image.hpp"
#include "kernel_log.hpp"
#include "resample/avx2.hpp"
#include "resample/fixed.hpp"
#include "resample/resizer.hpp"
#include "resample/sse2.hpp"

namespace smg {

struct alignas(64) Vec64 {
    uint8_t b[64];
};

// The AVX-512 VBMI horizontal plan: 16 output pixels per group, one channel per register.
struct VbmiPlan {
    int pairs = 0;               // taps rounded up to pairs
    std::vector<int> base;       // first source pixel of each group's window
    std::vector<uint8_t> fits;   // window holds every tap of the group
    std::vector<Vec64> offsets;  // per group: bytes 4i, 4i+2 = C * (start[16g + i] - base), + C
    std::vector<Vec64> weights;  // per group and tap pair: low, then high int16 weight pairs
};

// The horizontal kernel one resize uses, with the plan it needs (only that one is filled).
struct HPlan {
    KernelId kernel = KernelId::HorizontalScalar;
    VbmiPlan vbmi;
    Avx2HPlan avx2;
    Sse2HPlan sse2;
};

// Weights are 22-bit, too wide for 16-bit multiplies, so each is split exactly as
// k = hi * 2^11 + lo with lo in [0, 2^11) and hi in int16; the two partial dot products are
// recombined as (sum_hi << 11) + sum_lo, the same integer sum Pillow computes.
// C source channels (1..4) in rows of in_w pixels, CO (C, or 3 from 4) out.
HPlan make_hplan(const AxisWeights& kn, int in_w, int out_w, int C, int CO);

// Source rows [row0 + y0, row0 + y1) through the horizontal kernel into out rows [0, y1 - y0);
// plan: make_hplan's for this kernel and src's width and channels.
void horizontal_rows(const ImageView& src, int row0, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride,
                     int out_w, int out_channels, const AxisWeights& kn, const HPlan& plan);
// Output rows [y0, y1) of the vertical kernel into out rows [0, y1 - y0). `shift` is subtracted
// from Pillow's bounds (the horizontal pass may have produced only rows [shift, ...)).
void vertical_rows(const ImageView& src, int shift, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride, int out_w,
                   const AxisWeights& kn);
// NEAREST: Pillow's ImagingScaleAffine source index per output index (-1: filled with zeros).
std::vector<int> nearest_table(int in_size, int out_size);
void nearest_rows(const ImageView& src, const std::vector<int>& xin, const std::vector<int>& yin, int64_t y0,
                  int64_t y1, uint8_t* out_base, int64_t out_stride);

}  // namespace smg
