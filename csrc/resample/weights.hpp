// Pillow's resampling weights for one axis: its filter functions and support, in double
// precision, rounded to 22-bit fixed point, and the windows trimmed to their nonzero runs in the
// form every row kernel reads (torch's weights take the same form: resample/torch_weights.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smg {

// Values are Pillow's Resampling enum values.
enum class Filter : int { Nearest = 0, Lanczos = 1, Bilinear = 2, Bicubic = 3, Box = 4, Hamming = 5 };

bool is_valid_filter(Filter f);

// Fixed-point weights of one axis. Pillow's window for output i is trimmed to the run of its
// weights between the first and the last nonzero one: [pil_min[i], pil_min[i] + pil_len[i]).
// The trimmed-off weights are exact integer zeros, so the sums are Pillow's; upscaling BICUBIC,
// for example, has at most 4 nonzero weights in Pillow's 5-tap window. Every output index has
// `taps` (the longest trimmed window) weights starting at source index start[i], zero-padded,
// so the inner loops have a fixed trip count.
struct AxisWeights {
    int taps = 0;
    std::vector<int> start;
    std::vector<int32_t> weights;       // out_size * taps
    std::vector<int> pil_min, pil_len;  // trimmed bounds per output index
};

// Pillow's weights for resizing in_size pixels to out_size with filter f, computed under the
// default floating-point environment. Throws std::invalid_argument for Nearest (no convolution).
AxisWeights make_weights(int in_size, int out_size, Filter f);

// Untrimmed fixed-point windows, one row of ksize weights per output index (22-bit scale:
// sum(pixel * w) + 2^21, then >> 22), of which the first xsize[i] apply from source xmin[i].
struct WeightWindows {
    WeightWindows(int out_size, int ksize_)
        : ksize(ksize_), xmin(out_size, 0), xsize(out_size, 0), weights(size_t(out_size) * ksize_, 0) {}
    int32_t* row(int i) { return &weights[size_t(i) * ksize]; }
    const int32_t* row(int i) const { return &weights[size_t(i) * ksize]; }
    int ksize;
    std::vector<int> xmin, xsize;
    std::vector<int32_t> weights;
};

// The weights of these windows (trimmed to their nonzero runs, padded to a common tap count).
AxisWeights pack_weights(int in_size, const WeightWindows& win);

// The largest s (at most kPrecisionBits - 1) such that every weight is w16 * 2^s with w16 in
// int16, or -1 when there is none. torch's weights are int16 values scaled this way, so a kernel
// can take one 16-bit dot product per tap pair instead of the split's two: with S = sum(pixel *
// w16), Pillow's (S * 2^s + 2^21) >> 22 is exactly (S + 2^(21 - s)) >> (22 - s).
int int16_weight_shift(const AxisWeights& kn);

}  // namespace smg
