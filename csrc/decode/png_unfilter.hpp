// Undoing PNG's per-row filters (None, Sub, Up, Average, Paeth; PNG spec section 9) for 8-bit
// samples, in place: the inflated IDAT stream of `height` rows, each a filter-type byte followed
// by `row_bytes` filtered bytes. Lossless, so any correct implementation gives Pillow's bytes.
#pragma once

#include <cstdint>

namespace smg {

// data holds size bytes; bpp: bytes per pixel (1 to 8). Throws std::invalid_argument for bad
// sizes (data shorter than height * (row_bytes + 1)). Returns false, leaving the rows partly
// undone, at the first row whose filter type is not 0-4 (the caller then hands the file to
// Pillow, which decides).
bool png_unfilter(uint8_t* data, int64_t size, int64_t height, int64_t row_bytes, int bpp);

}  // namespace smg
