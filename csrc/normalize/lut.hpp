// Per-channel 256-entry lookup tables: every uint8 value maps to its normalized output, computed
// once with the reference's exact operation order, then written in the output dtype.
#pragma once

#include <cstdint>

namespace smg {

// UInt8 is the resized byte itself in patch order, not normalized (transformers' torchvision
// processors return that when called with do_rescale=False, do_normalize=False): its table is the
// identity and the normalization parameters only have to be valid.
enum class DType : int { Float32 = 0, BFloat16 = 1, Float16 = 2, UInt8 = 3 };

int dtype_size(DType d);
// The element's Python buffer-protocol format: "f", "H" (bfloat16 bits), "e", "B".
const char* dtype_format(DType d);

enum class LutRecipe : int {
    // transformers' PIL processors: y = f32(f32(f64(u) * rescale) - f32(mean)) / f32(std)
    HfRescaleNormalize = 0,
    // Kimi-K2.5 upstream (NumPy, float32 pixels with float64 constants in in-place ops):
    // x = f32(f64(u) / 255.0); x = f32(f64(x) - mean); y = f32(f64(x) * (1.0 / std)), all f64
    KimiDivideMultiply = 1,
    // transformers' torchvision processors (rescale fused into normalize):
    // y = (f32(u) - M) / S with M = f32(f32(mean) * f32(1 / rescale)), S likewise from std
    TorchFusedNormalize = 2,
    // transformers' torchvision processors with do_normalize=False: y = f32(u) * f32(rescale)
    TorchRescale = 3,
};

bool is_valid_dtype(DType d);
bool is_valid_recipe(LutRecipe r);

// What the reference normalizes with: the recipe (operation order) and its constants.
struct NormParams {
    LutRecipe recipe;
    double rescale;  // used by HfRescaleNormalize and TorchFusedNormalize; Kimi's divides by 255
    double mean[3];
    double std_[3];
};

// The same normalization as HfRescaleNormalize parameters: TorchFusedNormalize is that recipe with
// rescale 1 and the pre-scaled (float-exact) mean and std, TorchRescale that recipe with rescale
// f32(rescale), mean 0 and std 1 (u has 8 bits and f32(rescale) 24, so f64(u) * f32(rescale) is
// exact and rounds to float32 once, as the float32 product does), so the SIMD kernels need no
// other form; other recipes are returned unchanged. Throws std::invalid_argument when the pre-scaled
// constants are not finite or the std is zero.
NormParams effective_params(const NormParams& p);

// Fills out[c * 256 + u] for c in 0..2 in the element type of `dtype`. Throws
// std::invalid_argument for a zero or non-finite std, a non-finite mean, or an unknown recipe or
// dtype.
void build_lut(const NormParams& p, DType dtype, void* out);

// Round-to-nearest-even conversions of a float32 value (NaN stays NaN).
uint16_t float_to_bf16(float f);
uint16_t float_to_f16(float f);

}  // namespace smg
