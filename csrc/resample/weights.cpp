#include "resample/weights.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fp_env.hpp"
#include "resample/fixed.hpp"

namespace smg {

namespace {

// ---- Pillow's filter functions (same expressions, same float constants) ----

double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x) {
    if (x < 0.0) x = -x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double bicubic_filter(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

double sinc_filter(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return std::sin(x) / x;
}

double lanczos_filter(double x) {
    if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
    return 0.0;
}

struct FilterDef {
    double (*fn)(double);
    double support;
};

FilterDef filter_def(Filter f) {
    switch (f) {
        case Filter::Box: return {box_filter, 0.5};
        case Filter::Bilinear: return {bilinear_filter, 1.0};
        case Filter::Hamming: return {hamming_filter, 1.0};
        case Filter::Bicubic: return {bicubic_filter, 2.0};
        case Filter::Lanczos: return {lanczos_filter, 3.0};
        default: throw std::invalid_argument("filter has no convolution kernel");
    }
}

}  // namespace

bool is_valid_filter(Filter f) { return int(f) >= 0 && int(f) <= 5; }

AxisWeights make_weights(int in_size, int out_size, Filter f) {
    const DefaultFpEnv fp_env;  // the weights are Pillow's under the default rounding
    const FilterDef fd = filter_def(f);
    // Pillow: scale = (double)(in1 - in0) / outSize with float box coordinates.
    const double scale = double(float(in_size) - 0.0f) / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = fd.support * filterscale;
    const int ksize = int(std::ceil(support)) * 2 + 1;
    const double inv_filterscale = 1.0 / filterscale;

    WeightWindows win(out_size, ksize);
    std::vector<double> w(ksize);
    for (int xx = 0; xx < out_size; ++xx) {
        const double center = 0.0f + (xx + 0.5) * scale;
        int xmin = int(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = int(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; ++x) {
            w[x] = fd.fn((x + xmin - center + 0.5) * inv_filterscale);
            ww += w[x];
        }
        if (ww != 0.0)
            for (int x = 0; x < xmax; ++x) w[x] /= ww;
        int32_t* k = win.row(xx);
        for (int x = 0; x < xmax; ++x) {
            const double s = w[x] * (1 << kPrecisionBits);
            k[x] = w[x] < 0 ? int32_t(-0.5 + s) : int32_t(0.5 + s);
        }
        win.xmin[xx] = xmin;
        win.xsize[xx] = xmax;
    }
    return pack_weights(in_size, win);
}

AxisWeights pack_weights(int in_size, const WeightWindows& win) {
    const int out_size = int(win.xmin.size());
    std::vector<int> lo(out_size), len(out_size), skip(out_size);
    int taps = 1;
    for (int xx = 0; xx < out_size; ++xx) {
        const int32_t* k = win.row(xx);
        int a = 0, b = win.xsize[xx];
        while (a < b && k[a] == 0) ++a;
        while (b > a && k[b - 1] == 0) --b;
        if (a == b) b = std::min(a + 1, win.xsize[xx]);  // all zero: keep one (zero) weight
        lo[xx] = win.xmin[xx] + a;
        len[xx] = b - a;
        skip[xx] = a;
        taps = std::max(taps, b - a);
    }
    AxisWeights kn;
    kn.taps = std::min(taps, in_size);
    kn.start.resize(out_size);
    kn.weights.assign(size_t(out_size) * kn.taps, 0);
    kn.pil_min = lo;
    kn.pil_len = len;
    for (int xx = 0; xx < out_size; ++xx) {
        const int start = std::min(lo[xx], in_size - kn.taps);
        const int32_t* k = win.row(xx) + skip[xx];
        std::copy(k, k + len[xx], &kn.weights[size_t(xx) * kn.taps] + (lo[xx] - start));
        kn.start[xx] = start;
    }
    return kn;
}

int int16_weight_shift(const AxisWeights& kn) { return int16_shift(kn.weights.data(), kn.weights.size()); }

}  // namespace smg
