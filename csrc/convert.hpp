// Mode conversions to packed RGB, done row by row while the resampler reads its source, so no
// full-size converted copy of an image ever exists. Each format names its byte layout and, where
// alpha is involved, the reference whose arithmetic it reproduces.
#pragma once

#include <cstdint>

#include "image.hpp"

namespace smg {

enum class PixelFormat : int {
    RGB = 0,                       // 3 bytes: R, G, B
    RGBX = 1,                      // 4 bytes: R, G, B, ignored (Pillow's RGB storage; RGBA with alpha dropped)
    Gray = 2,                      // 1 byte, replicated to R = G = B (Pillow L -> RGB, np.repeat)
    GrayAlphaDrop = 3,             // 2 bytes: L, A; alpha dropped (Pillow LA -> RGB)
    GrayAlphaOverWhitePillow = 4,  // 2 bytes: L replicated + A, then RGBA over white as below
    RgbaOverWhitePillow = 5,       // 4 bytes: Image.alpha_composite(opaque white, rgba).convert("RGB")
    RgbaOverWhiteNumpy = 6,        // 4 bytes: round(a/255 * c + (1 - a/255) * 255) in float64, half to even
    RgbaOverWhiteTorch = 7,        // 4 bytes: transformers' torchvision backend on arrays, float32 (see convert.cpp)
};

bool is_valid_format(PixelFormat f);
// Bytes per source pixel the format reads.
int format_channels(PixelFormat f);
// True for RGB and RGBX: the resampler reads them in place, with no conversion.
bool is_direct_format(PixelFormat f);
// The format run() assumes for a source with this many channels (3: RGB, 4: RGBX).
PixelFormat default_format(int channels);

// The 64 KiB table out = table[alpha * 256 + value] of an over-white recipe (built once, then
// shared); nullptr for formats without alpha blending.
const uint8_t* over_white_table(PixelFormat f);

// Source rows [y0, y1) of src (format f, src.channels == format_channels(f)) as packed RGB into
// out rows [0, y1 - y0) (3 bytes per pixel, out_stride bytes apart).
void convert_rows(PixelFormat f, const ImageView& src, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride);

// The whole of src (format f) as packed RGB into out (rows out_stride bytes apart), on the
// thread pool.
void convert_image(PixelFormat f, const ImageView& src, uint8_t* out, int64_t out_stride);

}  // namespace smg
