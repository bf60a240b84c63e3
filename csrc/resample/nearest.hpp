// NEAREST, as Pillow resizes with it: not a convolution but its affine path (ImagingScaleAffine in
// Geometry.c), one source pixel per output pixel.
#pragma once

#include <cstdint>
#include <vector>

#include "image.hpp"

namespace smg {

// The source index per output index, from Pillow's running double sums (-1: outside the image,
// filled with zeros).
std::vector<int> nearest_table(int in_size, int out_size);
// Output rows [y0, y1) into out_base rows [0, y1 - y0), through the tables of both axes.
void nearest_rows(const ImageView& src, const std::vector<int>& xin, const std::vector<int>& yin, int64_t y0,
                  int64_t y1, uint8_t* out_base, int64_t out_stride);

}  // namespace smg
