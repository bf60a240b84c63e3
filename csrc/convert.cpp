#include "convert.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel.hpp"

namespace smg {

namespace {

// Pillow's ImagingAlphaComposite with an opaque white destination (dst = 255, dst alpha 255).
// Its general weights reduce exactly: outa255 = 255 * 255, coef1 = a * 255 * 255 * 128 / outa255
// = a * 128 (the division has no remainder), coef2 = (255 - a) * 128. It rounds the division by
// 255 with the shift trick ((t >> 8) + t) >> 8 after adding half (0x80 << 7), then drops the 7
// precision bits; a fully transparent pixel copies the destination (white).
uint8_t pillow_over_white(uint32_t c, uint32_t a) {
    if (a == 0) return 255;
    constexpr uint32_t kBits = 7;
    const uint32_t coef1 = a * 255u * 255u * (1u << kBits) / (255u * 255u);
    const uint32_t coef2 = 255u * (1u << kBits) - coef1;
    const uint32_t t = c * coef1 + 255u * coef2 + (0x80u << kBits);
    return uint8_t((((t >> 8) + t) >> 8) >> kBits);
}

// transformers' convert_to_rgb on a uint8 HWC array: alpha = a / 255 (float64), then
// alpha * c + (1 - alpha) * 255, np.round (half to even: nearbyint in the default rounding mode),
// astype(uint8). The build compiles with -ffp-contract=off, so no fused multiply-add changes the
// two products' rounding; the exhaustive test compares every (c, a) pair with NumPy itself.
uint8_t numpy_over_white(uint32_t c, uint32_t a) {
    const double alpha = double(a) / 255.0;
    const double blended = alpha * double(c) + (1.0 - alpha) * 255.0;
    return uint8_t(std::nearbyint(blended));
}

// transformers' torchvision backend on a uint8 array with 4 channels: tvF.to_dtype to float32
// (times f32(1 / 255)), c * a + (1 - a) in float32, tvF.to_dtype back (times f32(255.999),
// truncated). The products round as torch's float32 kernels do: -ffp-contract=off, no FMA.
uint8_t torch_over_white(uint32_t c, uint32_t a) {
    const float k = float(1.0 / 255.0);
    const float cf = float(c) * k, af = float(a) * k;
    const float blended = cf * af + (1.0f - af);
    return uint8_t(blended * float(255.0 + 1.0 - 1e-3));
}

std::vector<uint8_t> build(uint8_t (*fn)(uint32_t, uint32_t)) {
    std::vector<uint8_t> t(256 * 256);
    for (uint32_t a = 0; a < 256; ++a)
        for (uint32_t c = 0; c < 256; ++c) t[a * 256 + c] = fn(c, a);
    return t;
}

void rgbx_row(const uint8_t* in, int w, uint8_t* out) {
    for (int x = 0; x < w; ++x, in += 4, out += 3) {
        out[0] = in[0];
        out[1] = in[1];
        out[2] = in[2];
    }
}

// Grey value at byte 0 of each `step`-byte pixel, replicated.
void gray_row(const uint8_t* in, int w, int step, uint8_t* out) {
    for (int x = 0; x < w; ++x, in += step, out += 3) out[0] = out[1] = out[2] = in[0];
}

void gray_alpha_row(const uint8_t* in, int w, const uint8_t* lut, uint8_t* out) {
    for (int x = 0; x < w; ++x, in += 2, out += 3) out[0] = out[1] = out[2] = lut[in[1] * 256 + in[0]];
}

void rgba_row(const uint8_t* in, int w, const uint8_t* lut, uint8_t* out) {
    for (int x = 0; x < w; ++x, in += 4, out += 3) {
        const uint8_t* row = lut + in[3] * 256;
        out[0] = row[in[0]];
        out[1] = row[in[1]];
        out[2] = row[in[2]];
    }
}

}  // namespace

bool is_valid_format(PixelFormat f) { return int(f) >= 0 && int(f) <= 7; }

int format_channels(PixelFormat f) {
    switch (f) {
        case PixelFormat::RGB: return 3;
        case PixelFormat::Gray: return 1;
        case PixelFormat::GrayAlphaDrop:
        case PixelFormat::GrayAlphaOverWhitePillow: return 2;
        case PixelFormat::RGBX:
        case PixelFormat::RgbaOverWhitePillow:
        case PixelFormat::RgbaOverWhiteNumpy:
        case PixelFormat::RgbaOverWhiteTorch: return 4;
    }
    throw std::invalid_argument("unknown pixel format " + std::to_string(int(f)));
}

bool is_direct_format(PixelFormat f) { return f == PixelFormat::RGB || f == PixelFormat::RGBX; }

PixelFormat default_format(int channels) {
    if (channels == 3) return PixelFormat::RGB;
    if (channels == 4) return PixelFormat::RGBX;
    throw std::invalid_argument("only 3 (RGB) or 4 (RGBX) channels have a default pixel format");
}

const uint8_t* over_white_table(PixelFormat f) {
    // Function-local statics: built on first use, once, thread-safely.
    switch (f) {
        case PixelFormat::GrayAlphaOverWhitePillow:
        case PixelFormat::RgbaOverWhitePillow: {
            static const std::vector<uint8_t> pillow = build(pillow_over_white);
            return pillow.data();
        }
        case PixelFormat::RgbaOverWhiteNumpy: {
            static const std::vector<uint8_t> numpy = build(numpy_over_white);
            return numpy.data();
        }
        case PixelFormat::RgbaOverWhiteTorch: {
            static const std::vector<uint8_t> torch = build(torch_over_white);
            return torch.data();
        }
        default: return nullptr;
    }
}

void convert_rows(PixelFormat f, const ImageView& src, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride) {
    if (src.channels != format_channels(f))
        throw std::invalid_argument("convert: channel count does not match the format");
    const uint8_t* lut = over_white_table(f);
    const int w = src.width;
    for (int64_t y = y0; y < y1; ++y) {
        const uint8_t* in = src.data + y * src.stride;
        uint8_t* o = out + (y - y0) * out_stride;
        switch (f) {
            case PixelFormat::RGB: std::memcpy(o, in, size_t(w) * 3); break;
            case PixelFormat::RGBX: rgbx_row(in, w, o); break;
            case PixelFormat::Gray: gray_row(in, w, 1, o); break;
            case PixelFormat::GrayAlphaDrop: gray_row(in, w, 2, o); break;
            case PixelFormat::GrayAlphaOverWhitePillow: gray_alpha_row(in, w, lut, o); break;
            case PixelFormat::RgbaOverWhitePillow:
            case PixelFormat::RgbaOverWhiteNumpy:
            case PixelFormat::RgbaOverWhiteTorch: rgba_row(in, w, lut, o); break;
        }
    }
}

void convert_image(PixelFormat f, const ImageView& src, uint8_t* out, int64_t out_stride) {
    if (src.channels != format_channels(f))
        throw std::invalid_argument("convert: channel count does not match the format");
    over_white_table(f);  // build a table once here, not racing inside the workers
    parallel_for(src.height, 64,
                 [&](int64_t b, int64_t e) { convert_rows(f, src, b, e, out + b * out_stride, out_stride); });
}

}  // namespace smg
