// The native enums, typed: each value named and documented (integers are refused where an enum
// is expected).
#include "bind_common.hpp"
#include "convert.hpp"
#include "normalize/lut.hpp"
#include "patchify/layout.hpp"
#include "resample/resizer.hpp"

namespace smg::bind {

void bind_enums(py::module_& m) {
    py::enum_<Filter>(m, "Filter", "Resampling filter; values are Pillow's Image.Resampling values.")
        .value("NEAREST", Filter::Nearest, "Nearest neighbour (Pillow's affine NEAREST path).")
        .value("LANCZOS", Filter::Lanczos, "Lanczos, 3 lobes.")
        .value("BILINEAR", Filter::Bilinear, "Bilinear (triangle) filter (what the Gemma 3 processors use).")
        .value("BICUBIC", Filter::Bicubic, "Bicubic, a = -0.5 (what the Qwen and Kimi processors use).")
        .value("BOX", Filter::Box, "Box (area average).")
        .value("HAMMING", Filter::Hamming, "Hamming-windowed sinc.");
    py::enum_<PassOrder>(m, "PassOrder", "Which separable pass runs first; Pillow 13 changed the rule.")
        .value("HORIZONTAL_FIRST", PassOrder::HorizontalFirst, "Pillow <= 12: horizontal, then vertical.")
        .value("PILLOW13", PassOrder::Pillow13,
               "Pillow 13: vertical first when the height shrinks by more than 2x the width.");
    py::enum_<Resampler>(m, "Resampler", "Whose resize arithmetic is reproduced.")
        .value("PILLOW", Resampler::Pillow, "Pillow's Resample.c (pass order per PassOrder).")
        .value("TORCH", Resampler::Torch,
               "torch's uint8 antialiased interpolate on CPU (torchvision's resize); BICUBIC, BILINEAR and\n"
               "LANCZOS, horizontal pass first whatever the PassOrder.");
    py::enum_<PixelFormat>(m, "PixelFormat",
                           "How run() reads a decoded image's bytes; formats other than RGB and RGBX are\n"
                           "converted to RGB row by row while the resampler reads them, with the named\n"
                           "reference's arithmetic.")
        .value("RGB", PixelFormat::RGB, "3 bytes per pixel: R, G, B.")
        .value("RGBX", PixelFormat::RGBX,
               "4 bytes: R, G, B and one ignored (Pillow's RGB memory; RGBA with alpha dropped).")
        .value("GRAY", PixelFormat::Gray, "1 byte, replicated to R = G = B (Pillow's L -> RGB; np.repeat).")
        .value("GRAY_ALPHA_DROP", PixelFormat::GrayAlphaDrop,
               "2 bytes (L, A): L replicated, A dropped (Pillow's LA -> RGB).")
        .value("GRAY_ALPHA_OVER_WHITE_PILLOW", PixelFormat::GrayAlphaOverWhitePillow,
               "2 bytes (L, A): LA -> RGBA (L replicated), then RGBA_OVER_WHITE_PILLOW.")
        .value("RGBA_OVER_WHITE_PILLOW", PixelFormat::RgbaOverWhitePillow,
               "4 bytes: Image.alpha_composite(opaque white, rgba).convert('RGB') (Pillow's integer arithmetic).")
        .value("RGBA_OVER_WHITE_NUMPY", PixelFormat::RgbaOverWhiteNumpy,
               "4 bytes: transformers' convert_to_rgb on uint8 arrays: np.round(a / 255 * c + (1 - a / 255) * 255)\n"
               "in float64.")
        .value("RGBA_OVER_WHITE_TORCH", PixelFormat::RgbaOverWhiteTorch,
               "4 bytes: transformers' torchvision backend on uint8 arrays: c * a + (1 - a) in float32 after\n"
               "tvF.to_dtype (u * f32(1 / 255)), back by tvF.to_dtype (times f32(255.999), truncated).");
    py::enum_<DType>(m, "DType", "Output element type.")
        .value("FLOAT32", DType::Float32, "float32.")
        .value("BFLOAT16", DType::BFloat16, "bfloat16 (NumPy arrays hold its bits as uint16).")
        .value("FLOAT16", DType::Float16, "IEEE float16.")
        .value("UINT8", DType::UInt8, "uint8: the resized byte itself, not normalized (patch order only).");
    py::enum_<LutRecipe>(m, "LutRecipe", "The reference's normalization arithmetic, operation for operation.")
        .value("HF_RESCALE_NORMALIZE", LutRecipe::HfRescaleNormalize,
               "transformers' PIL processors: f32(f32(f64(u) * rescale) - f32(mean)) / f32(std).")
        .value("KIMI_DIVIDE_MULTIPLY", LutRecipe::KimiDivideMultiply,
               "Kimi-K2.5 upstream: (f32(f64(u) / 255) - f32(mean)) * f32(1 / f32(std)); rescale unused.")
        .value("TORCH_FUSED_NORMALIZE", LutRecipe::TorchFusedNormalize,
               "transformers' torchvision processors: (f32(u) - M) / S, M = f32(f32(mean) * f32(1 / rescale)),\n"
               "S likewise from std.")
        .value("TORCH_RESCALE", LutRecipe::TorchRescale,
               "transformers' torchvision processors with do_normalize=False: f32(u) * f32(rescale); mean and\n"
               "std unused.");
    py::enum_<PatchOrder>(m, "PatchOrder", "Where a patch's values go inside its output row.")
        .value("CHANNELS_FIRST", PatchOrder::ChannelFirst,
               "c * T * P * P + t * P * P + py * P + px (Qwen's, Kimi's, Gemma 3's whole images).")
        .value("CHANNELS_LAST", PatchOrder::ChannelLast,
               "(py * P + px) * 3 + c, rows in raster order (Gemma 4's); merge and temporal 1 only.");
}

}  // namespace smg::bind
