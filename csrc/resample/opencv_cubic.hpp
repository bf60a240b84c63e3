// OpenCV's INTER_CUBIC resize of 32-bit float images, as cv::resize computes it without IPP.
//
// Keys' cubic with a = -0.75, sampled at (d + 0.5) * scale - 0.5 (scale = 1 / (out / in) in double,
// the position rounded to float), taps clamped to the edge pixel, weights computed in float. Each
// row is filtered horizontally into a float buffer, then four buffered rows are combined per
// output row; every sum runs tap 0 to tap 3 in float, one rounding per multiply and per add (no
// fused multiply-add: OpenCV's x86-64 baseline is SSE3, and its float cubic kernels are not
// dispatched). A same-size resize is a copy, as cv::resize makes it. This is the generic path:
// OpenCV builds with Intel IPP (opencv-python's wheels) send most float cubic resizes to IPP
// instead, whose results differ and depend on the CPU (docs/exactness.md#pixtral).
#pragma once

#include <cstdint>

namespace smg {

// A packed (height, width, channels) source of floats or of uint8 values read as floats.
struct CubicSource {
    const float* f32 = nullptr;  // one of f32 / u8 is set
    const uint8_t* u8 = nullptr;
    int width = 0, height = 0, channels = 0;
    int pixel_stride = 0;    // elements between pixels (>= channels: the first channels are read)
    int64_t row_stride = 0;  // elements between rows
};

// Resizes src to out_w x out_h into out, packed (out_h, out_w, channels) floats. With norm set, each
// value v becomes (v / 255 - mean[c]) / std[c] in float (three roundings, mistral_common's
// normalize) and out is channel-first (channels, out_h, out_w) instead. Sizes are the caller's to
// check (positive, channels 1..4).
struct CubicNormalize {
    float mean[4];
    float std[4];
};
void opencv_cubic_resize(const CubicSource& src, int out_w, int out_h, float* out, const CubicNormalize* norm);

}  // namespace smg
