// The resampler's row kernels: the interface of each pass's dispatch table (dispatch.hpp) and the
// entry points each instruction set's file defines. Every kernel computes Pillow's integer sums
// (resample/fixed.hpp) exactly; they differ only in speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu.hpp"
#include "image.hpp"
#include "resample/weights.hpp"

namespace smg {

// ---- the vertical pass: out[x] = clip8(2^21 + sum_j row_j[x] * k[j]) for x < len, where
// row_j = first + j * stride and j < taps ----

using VerticalRowFn = void (*)(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);

// ---- the horizontal pass ----

// A kernel's preparation for one resize's horizontal weights (shuffle controls, split weights),
// made once per resize shape and read, never written, by every row (of any thread).
struct HorizontalPlan {
    virtual ~HorizontalPlan() = default;
    // The bytes it holds (what the resizer's shape cache counts).
    virtual size_t bytes() const { return sizeof(*this); }
};

struct HorizontalKernel {
    // The plan for weights kn over rows of in_w pixels of C channels (1..4) written as CO (C, or 3
    // from 4: RGBX's pad byte dropped); null when the kernel does not take this resize (the next
    // row of the table is asked).
    std::unique_ptr<HorizontalPlan> (*plan)(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
    // Source rows [row0 + y0, row0 + y1) of src through the pass into out rows [0, y1 - y0) of
    // out_w pixels of CO channels. plan: this kernel's, for src's width and channel count.
    void (*rows)(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                 int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);
};

// ---- entry points, per instruction set ----

// resample/scalar.cpp: portable C++ (the compiler vectorizes the vertical loop), any channel count.
void vertical_row_scalar(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
std::unique_ptr<HorizontalPlan> horizontal_plan_scalar(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
void horizontal_rows_scalar(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0,
                            int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);

// The longest window vertical_row_avx2_madd splits (as 2-row pairs); past it, and for torch's int16
// weights, it runs vertical_row_avx2's code (so the tuner does not time it there).
constexpr int kVerticalMaddMaxTaps = 128;

#if SMG_X86
// resample/sse2.cpp: SSE2, part of x86-64 itself.
void vertical_row_sse2(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
std::unique_ptr<HorizontalPlan> horizontal_plan_sse2(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
void horizontal_rows_sse2(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);

// resample/avx2.cpp (its plan: resample/avx2_plan.cpp).
void vertical_row_avx2(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
// The same sums with Pillow's weights split into 16-bit halves (two vpmaddwd per row pair) instead of
// int32 multiplies: faster where vpmulld is slow. Timed against vertical_row_avx2 (tune.hpp).
void vertical_row_avx2_madd(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
std::unique_ptr<HorizontalPlan> horizontal_plan_avx2(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
void horizontal_rows_avx2(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);

// resample/avx512.cpp: AVX-512 F/BW/VL vertically; VBMI horizontally, with VNNI dot products or
// without (one plan for both).
void vertical_row_avx512(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
std::unique_ptr<HorizontalPlan> horizontal_plan_vbmi(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
void horizontal_rows_vbmi(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);
void horizontal_rows_vnni(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);
#endif

#if defined(__aarch64__)
// resample/neon.cpp: NEON, part of AArch64 itself.
void vertical_row_neon(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len);
std::unique_ptr<HorizontalPlan> horizontal_plan_neon(const AxisWeights& kn, int in_w, int out_w, int C, int CO);
void horizontal_rows_neon(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO);
#endif

}  // namespace smg
