// The portable row kernels: plain C++, compiled for every architecture; the compiler vectorizes
// the vertical loop for the build's baseline. Any channel count (1..4).
#include "resample/fixed.hpp"
#include "resample/kernels.hpp"
#include "resample/row_loops.hpp"

namespace smg {

namespace {

// CI channels in, the first CO of them out (CO < CI drops RGBX's pad byte on the way).
template <int CI, int CO = CI>
void horizontal_row_scalar(const uint8_t* in, const AxisWeights& kn, uint8_t* out, int out_w) {
    const int taps = kn.taps;
    for (int xx = 0; xx < out_w; ++xx) {
        const uint8_t* p = in + int64_t(kn.start[xx]) * CI;
        const int32_t* k = &kn.weights[size_t(xx) * taps];
        int32_t ss[CO];
        for (int c = 0; c < CO; ++c) ss[c] = kHalf;
        for (int j = 0; j < taps; ++j)
            for (int c = 0; c < CO; ++c) ss[c] += int32_t(p[j * CI + c]) * k[j];
        for (int c = 0; c < CO; ++c) out[xx * CO + c] = clip8(ss[c]);
    }
}

}  // namespace

void vertical_row_scalar(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    vertical_row_body(first, stride, k, taps, out, len);
}

std::unique_ptr<HorizontalPlan> horizontal_plan_scalar(const AxisWeights&, int, int, int, int) {
    return std::make_unique<HorizontalPlan>();  // the weights are all it reads
}

void horizontal_rows_scalar(const HorizontalPlan&, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                            int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    each_row(src, row0, y0, y1, out, out_stride, false, [&](const uint8_t* in, uint8_t* o) {
        if (src.channels == 4 && CO == 3) {
            horizontal_row_scalar<4, 3>(in, kn, o, out_w);
            return;
        }
        switch (src.channels) {
            case 1: horizontal_row_scalar<1>(in, kn, o, out_w); break;
            case 2: horizontal_row_scalar<2>(in, kn, o, out_w); break;
            case 3: horizontal_row_scalar<3>(in, kn, o, out_w); break;
            default: horizontal_row_scalar<4>(in, kn, o, out_w); break;
        }
    });
}

}  // namespace smg
