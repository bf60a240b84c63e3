// torch's uint8 antialiased resampling weights (what torchvision's resize runs for uint8 tensors
// on CPU with antialias=True), in the form the shared row kernels read.
//
// torch computes each axis's weights in double like Pillow, but with its own filter expression,
// no float box coordinates, and a window clamped to its kernel size; it then rounds them to int16
// at the largest precision p (<= 22) whose largest weight still fits in int16, and each output is
// clamp((sum(pixel * w) + 2^(p-1)) >> p) per pass, horizontal first, uint8 in between, a pass
// skipped when its side is unchanged. Scaling each int16 weight by 2^(22 - p) gives the same
// integer sums Pillow's 22-bit kernels compute, so those kernels produce torch's exact output.
#pragma once

#include "resample/weights.hpp"

namespace smg {

// Whether torch's uint8 antialiased resize is implemented for this filter: BICUBIC (Keys,
// a = -0.5, 4 taps at scale 1), BILINEAR (the triangle, 2 taps at scale 1) and LANCZOS
// (sinc(x) * sinc(x / 3), 6 taps at scale 1; torch >= 2.14's mode="lanczos").
bool torch_implements(Filter f);

// The weights of one axis, scaled to the 22-bit kernels. Throws std::invalid_argument for a
// filter torch_implements() refuses or non-positive sizes.
AxisWeights make_torch_weights(int in_size, int out_size, Filter f);

}  // namespace smg
