// A JPEG decoded into a Pipeline's source image while the pipeline already runs on the rows
// decoded so far (one call's decode overlapped with its own resize).
#pragma once

#include <cstddef>
#include <cstdint>

#include "decode/jpeg.hpp"
#include "pipeline.hpp"

namespace smg {

// Decodes `size` bytes as jpeg_decode_rgb does (whole, on one of the pool's threads) into `img`
// (height rows of width * 3 bytes, `stride` apart) while `pl` resizes and patchifies it into dst
// (Pipeline::run_producing, format RGB). dst holds the result only when Whole is returned. decode_seconds
// (may be null) receives the decode's own CPU time (the rest of the call overlapped it or followed it).
JpegStatus jpeg_decode_run(const Pipeline& pl, const uint8_t* data, size_t size, uint8_t* img, ptrdiff_t stride,
                           int width, int height, int resize_w, int resize_h, int grid_h, int grid_w, void* dst,
                           double* decode_seconds = nullptr);

}  // namespace smg
