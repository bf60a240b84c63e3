// torch's bicubic interpolation without antialias on float32 planes (F.interpolate(mode="bicubic",
// align_corners=False, antialias=False) with an output size, on CPU), bit for bit.
//
// torch computes each output pixel from 4 x 4 taps: the rows' horizontal sums, then their vertical
// sum, each as one product, then fused multiply-adds (the first two terms fused as
// fma(t0, w0, t1 * w1)); the tap weights are Keys' cubic (a = -0.75) at the source position
// fma(in / out, i + 0.5, -0.5), with its own fused steps. The source is a canvas given as tiles.
#pragma once

#include <cstdint>

namespace smg {

// A (channels, rows * tile_h, cols * tile_w) float32 canvas stored as its tiles, row by row,
// each tile channel-first: a contiguous (rows * cols, channels, tile_h, tile_w) array.
struct TiledCanvas {
    const float* data;
    int channels;
    int rows;
    int cols;
    int tile_h;
    int tile_w;
};

// Resizes the canvas to (channels, out_h, out_w) into dst (contiguous).
void torch_bicubic_float(const TiledCanvas& src, float* dst, int out_h, int out_w);

}  // namespace smg
