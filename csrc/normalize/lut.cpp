#include "normalize/lut.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace smg {

int dtype_size(DType d) { return d == DType::Float32 ? 4 : d == DType::UInt8 ? 1 : 2; }

const char* dtype_format(DType d) {
    switch (d) {
        case DType::Float32: return "f";
        case DType::BFloat16: return "H";
        case DType::Float16: return "e";
        default: return "B";
    }
}

bool is_valid_dtype(DType d) {
    return d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16 || d == DType::UInt8;
}

bool is_valid_recipe(LutRecipe r) {
    return r == LutRecipe::HfRescaleNormalize || r == LutRecipe::KimiDivideMultiply ||
           r == LutRecipe::TorchFusedNormalize || r == LutRecipe::TorchRescale;
}

NormParams effective_params(const NormParams& p) {
    if (p.recipe == LutRecipe::TorchRescale) {
        // A uint8 tensor times the Python float rescale: float32 arithmetic, the scalar rounded.
        const float k = float(p.rescale);
        if (!std::isfinite(k)) throw std::invalid_argument("rescale_factor must be finite in float32");
        return NormParams{LutRecipe::HfRescaleNormalize, double(k), {0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}};
    }
    if (p.recipe != LutRecipe::TorchFusedNormalize) return p;
    // torch.tensor(mean) is float32; multiplying it by the Python float 1 / rescale computes in
    // float32 with that scalar rounded to float32.
    const float k = float(1.0 / p.rescale);
    NormParams e{LutRecipe::HfRescaleNormalize, 1.0, {}, {}};
    for (int c = 0; c < 3; ++c) {
        const float m = float(p.mean[c]) * k, s = float(p.std_[c]) * k;
        if (!std::isfinite(m) || !std::isfinite(s) || s == 0.0f)
            throw std::invalid_argument(
                "image_mean and image_std divided by rescale_factor must be finite, std non-zero");
        e.mean[c] = m;
        e.std_[c] = s;
    }
    return e;
}

uint16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    const uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return uint16_t(u >> 16);
}

uint16_t float_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
    if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf (>= 65520)
    if (absx < 0x38800000u) {                                  // subnormal half (< 2^-14)
        // Scale into the subnormal range with an exact float add, which rounds to nearest even.
        float a;
        std::memcpy(&a, &absx, 4);
        const float r = a + 0.5f;  // 0.5 = 2^-1: ulp of results in [0.5, 1) is 2^-24 = half's subnormal ulp
        uint32_t ru;
        std::memcpy(&ru, &r, 4);
        return uint16_t(sign | (ru - 0x3f000000u));
    }
    const uint32_t mant_odd = (absx >> 13) & 1u;
    const uint32_t rounded = absx + 0xfffu + mant_odd;
    return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

void build_lut(const NormParams& params, DType dtype, void* out) {
    // Checked here because the enums may hold any integer when they come from outside C++.
    if (!is_valid_recipe(params.recipe)) throw std::invalid_argument("unknown normalization recipe");
    if (!is_valid_dtype(dtype)) throw std::invalid_argument("unknown output dtype");
    const NormParams p = effective_params(params);
    for (int c = 0; c < 3; ++c) {
        const float m = float(p.mean[c]);
        const float s = float(p.std_[c]);
        if (!(s != 0.0f) || !std::isfinite(s) || !std::isfinite(m))
            throw std::invalid_argument("image_std must be finite and non-zero, image_mean finite");
        for (int u = 0; u < 256; ++u) {
            float y;
            if (p.recipe == LutRecipe::HfRescaleNormalize) {
                const float r = float(double(u) * p.rescale);
                y = (r - m) / s;
            } else {
                // NumPy's `x -= mean; x *= std_inv` on a float32 x with float64 arrays computes
                // each step in float64 and stores float32: two roundings, not one.
                const float r = float(double(u) / 255.0);
                const float d = float(double(r) - p.mean[c]);
                y = float(double(d) * (1.0 / p.std_[c]));
            }
            const int i = c * 256 + u;
            switch (dtype) {
                case DType::Float32: static_cast<float*>(out)[i] = y; break;
                case DType::BFloat16: static_cast<uint16_t*>(out)[i] = float_to_bf16(y); break;
                case DType::Float16: static_cast<uint16_t*>(out)[i] = float_to_f16(y); break;
                case DType::UInt8: static_cast<uint8_t*>(out)[i] = uint8_t(u); break;
            }
        }
    }
}

}  // namespace smg
