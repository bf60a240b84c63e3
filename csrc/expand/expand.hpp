// The consumer's side of the compact delivery format: uint8 codes in the patch layout and the
// 3 x 256 normalization table back to the values the pipeline writes (a table lookup per element).
#pragma once

#include <cstdint>

#include "expand/kernels.hpp"

namespace smg {

// Writes out[i] = lut[(i / run) % 3][codes[i]] for i < n, with elements of elem_size bytes (4:
// float32, 2: bfloat16 / float16 bits) and lut holding 3 x 256 of them, channel-major. The patch
// layout holds runs of `run` elements of one channel, channels 0, 1, 2 in turn (run = T * P * P).
// n must be a multiple of 3 * run; elem_size 2 or 4 (checked by the caller). Runs the expand
// stage's kernel (dispatch.hpp) over the native thread pool; the result depends on neither.
void expand_lut(const uint8_t* codes, int64_t n, int64_t run, const void* lut, int elem_size, void* out);

// The same with a given kernel (the kernel comparison binary's entry).
void expand_lut_with(const ExpandKernel& k, const uint8_t* codes, int64_t n, int64_t run, const void* lut,
                     int elem_size, void* out);

}  // namespace smg
