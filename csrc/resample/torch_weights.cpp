#include "resample/torch_weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "fp_env.hpp"
#include "resample/fixed.hpp"

namespace smg {

namespace {

// Keys' cubic with a = -0.5, in torch's operation order (its two polynomial pieces are written
// differently from Pillow's, so a weight may differ from Pillow's in the last bit).
double torch_cubic(double x) {
    constexpr double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return 0.0;
}

// The triangle of torch's antialiased linear interpolation (support 1 at scale 1).
double torch_linear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return std::sin(x) / x;
}

// Lanczos with 3 lobes, sinc(x) * sinc(x / 3) on [-3, 3) (support 3 at scale 1).
double torch_lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

struct TorchFilter {
    double (*fn)(double);
    double taps;  // torch's interpolation size: the taps at scale 1
};

TorchFilter torch_filter(Filter f) {
    switch (f) {
        case Filter::Bicubic: return {torch_cubic, 4.0};
        case Filter::Bilinear: return {torch_linear, 2.0};
        case Filter::Lanczos: return {torch_lanczos, 6.0};
        default: throw std::invalid_argument("the torch resampler implements BICUBIC, BILINEAR and LANCZOS only");
    }
}

WeightWindows torch_windows(int in_size, int out_size, Filter f) {
    const TorchFilter tf = torch_filter(f);
    if (in_size < 1 || out_size < 1) throw std::invalid_argument("resize: empty image");
    const double kInterpSize = tf.taps;
    double (*const filter)(double) = tf.fn;
    const double scale = double(in_size) / double(out_size);  // align_corners=False, no scale factor
    const double support = scale >= 1.0 ? (kInterpSize * 0.5) * scale : kInterpSize * 0.5;
    const int ksize = int(std::ceil(support)) * 2 + 1;
    const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;

    std::vector<double> w(size_t(out_size) * ksize, 0.0);
    std::vector<int> xmin(out_size), xsize(out_size);
    double wt_max = 0.0;
    for (int i = 0; i < out_size; ++i) {
        const double center = scale * (i + 0.5);
        const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
        int64_t n = std::min<int64_t>(int64_t(center + support + 0.5), in_size) - lo;
        n = std::clamp<int64_t>(n, 0, ksize);  // torch clips a window one too long by rounding
        double* wi = &w[size_t(i) * ksize];
        double total = 0.0;
        for (int64_t j = 0; j < n; ++j) {
            wi[j] = filter((double(j + lo) - center + 0.5) * invscale);
            total += wi[j];
        }
        if (total != 0.0) {
            for (int64_t j = 0; j < n; ++j) {
                wi[j] /= total;
                wt_max = std::max(wt_max, wi[j]);
            }
        }
        xmin[i] = int(lo);
        xsize[i] = int(n);
    }
    // The largest precision (at most 22) at which the largest weight still rounds into int16.
    int p = 0;
    for (; p < 22; ++p)
        if (int64_t(0.5 + wt_max * double(int64_t(1) << (p + 1))) >= (1 << 15)) break;

    WeightWindows win(out_size, ksize);
    for (int i = 0; i < out_size; ++i) {
        win.xmin[i] = xmin[i];
        win.xsize[i] = xsize[i];
        int32_t* k = win.row(i);
        for (int j = 0; j < xsize[i]; ++j) {
            const double v = w[size_t(i) * ksize + j] * double(int64_t(1) << p);
            // torch stores the rounded value in an int16
            const int16_t q = int16_t(v < 0 ? int(-0.5 + v) : int(0.5 + v));
            k[j] = int32_t(q) * (int32_t(1) << (kPrecisionBits - p));
        }
    }
    return win;
}

}  // namespace

bool torch_implements(Filter f) { return f == Filter::Bicubic || f == Filter::Bilinear || f == Filter::Lanczos; }

AxisWeights make_torch_weights(int in_size, int out_size, Filter f) {
    const DefaultFpEnv fp_env;  // the weights are torch's under the default rounding
    return pack_weights(in_size, torch_windows(in_size, out_size, f));
}

}  // namespace smg
