#include "resample/passes.hpp"

#include <iterator>
#include <utility>

namespace smg {

HPlan make_hplan(const AxisWeights& kn, int in_w, int out_w, int C, int CO) {
    for (const KernelRow<HorizontalKernel>& k : kHorizontalKernels) {
        if (!k.allowed()) continue;
        if (std::unique_ptr<HorizontalPlan> plan = k.fn.plan(kn, in_w, out_w, C, CO)) return {&k, std::move(plan)};
    }
    // Not reached: the last row (portable) takes every resize.
    const KernelRow<HorizontalKernel>& last = kHorizontalKernels[std::size(kHorizontalKernels) - 1];
    return {&last, last.fn.plan(kn, in_w, out_w, C, CO)};
}

void horizontal_rows(const ImageView& src, int row0, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride,
                     int out_w, int out_channels, const AxisWeights& kn, const HPlan& plan) {
    if (y0 >= y1) return;
    note_ran(Stage::ResampleHorizontal, plan.kernel->id);
    plan.kernel->fn.rows(*plan.plan, kn, src, row0, y0, y1, out, out_stride, out_w, out_channels);
}

void vertical_rows(const ImageView& src, int shift, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride, int out_w,
                   const AxisWeights& kn, const KernelRow<VerticalRowFn>& kernel) {
    if (y0 >= y1) return;
    note_ran(Stage::ResampleVertical, kernel.id);
    const VerticalRowFn row = kernel.fn;
    const int len = out_w * src.channels;
    for (int64_t yy = y0; yy < y1; ++yy) {
        const int ymin = kn.pil_min[yy] - shift;
        const int32_t* k = &kn.weights[size_t(yy) * kn.taps] + (kn.pil_min[yy] - kn.start[yy]);
        row(src.data + int64_t(ymin) * src.stride, src.stride, k, kn.pil_len[yy], out + (yy - y0) * out_stride, len);
    }
}

}  // namespace smg
