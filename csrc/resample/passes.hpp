// The resampler's two separable passes over ranges of rows, each through its stage's dispatch
// table (dispatch.hpp). Internal to resample/resizer.cpp; the public API is resample/resizer.hpp.
#pragma once

#include <cstdint>
#include <memory>

#include "dispatch.hpp"
#include "image.hpp"
#include "resample/kernels.hpp"
#include "resample/weights.hpp"

namespace smg {

// The horizontal kernel one resize uses, with its plan (read-only once made: resizes of one
// shape share it).
struct HPlan {
    const KernelRow<HorizontalKernel>* kernel = nullptr;
    std::shared_ptr<const HorizontalPlan> plan;
};

// The first horizontal kernel allowed here that takes weights kn over rows of in_w pixels of C
// channels (1..4), written as CO (C, or 3 from 4).
HPlan make_hplan(const AxisWeights& kn, int in_w, int out_w, int C, int CO);

// Source rows [row0 + y0, row0 + y1) through the horizontal kernel into out rows [0, y1 - y0);
// plan: make_hplan's for this kernel and src's width and channels.
void horizontal_rows(const ImageView& src, int row0, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride,
                     int out_w, int out_channels, const AxisWeights& kn, const HPlan& plan);
// Output rows [y0, y1) of vertical kernel `kernel` into out rows [0, y1 - y0). `shift` is
// subtracted from Pillow's bounds (the horizontal pass may have produced only rows [shift, ...)).
void vertical_rows(const ImageView& src, int shift, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride, int out_w,
                   const AxisWeights& kn, const KernelRow<VerticalRowFn>& kernel);

}  // namespace smg
