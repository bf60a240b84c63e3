// The resampler's passes in SSE2, part of x86-64 itself (the "baseline" kernels' ISA), exact to
// Pillow's sums through the split weights of resample/fixed.hpp: two taps per pmaddwd.
// Horizontal: one output pixel's channels in the four int32 lanes. Vertical: 16 output bytes per
// step, two source rows' bytes interleaved. Internal to resample/passes.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "resample/resizer.hpp"

namespace smg {

struct alignas(16) Vec16 {
    int32_t v[4];
};

struct Sse2HPlan {
    int pairs = 0;  // taps rounded up to pairs
    // Per output pixel and tap pair q, hi then lo: the int16 parts of weights 2q (low half of each
    // int32 lane) and 2q + 1 (high half; 0 past the last tap), in all four lanes, as pmaddwd
    // takes them.
    std::vector<Vec16> weights;
};

// False (plan left empty) when some weight does not split (then the scalar kernel runs).
bool make_sse2_hplan(const AxisWeights& kn, int out_w, Sse2HPlan& plan);

// One row of CI (3 or 4) channel pixels into out_w pixels of CO (CI, or 3 from 4). Reads 4 bytes
// per source pixel: for CI == 3 one byte past the row's last pixel, which must be readable. On
// other CPUs than x86-64 it is never called (make_hplan picks the scalar kernel there).
void horizontal_row_sse2(const uint8_t* in, int CI, int CO, const AxisWeights& kn, const Sse2HPlan& plan, uint8_t* out,
                         int out_w);

// out[x] = clip(sum_j row_j[x] * k[j]), row_j = first + j * stride, for x from 0 up to the value
// returned (a multiple of 16, at most len; 0 when a weight does not split or there are more than
// 128 taps): the caller does the rest.
int vertical_row_sse2_steps(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);

}  // namespace smg
