// Fused normalize + patchify: resized uint8 RGB -> the encoder's patch layout in one pass, each
// value normalized exactly as the reference does and stored in the output dtype.
#pragma once

#include <cstdint>

#include "image.hpp"
#include "normalize.hpp"

namespace smg {

// Output row r = ((bh * (gw / m) + bw) * m + mh) * m + mw holds the patch at grid cell
// (bh * m + mh, bw * m + mw); column c*T*P*P + t*P*P + py*P + px holds channel c, pixel
// (py, px) of that patch, repeated for each t < T. With m = 1 and T = 1 this is MoonViT's
// row-major [N, 3, P, P] layout. Grid cells past the image's width/height read as pixel 0
// (zero padding on the right and bottom).
struct PatchLayout {
    int patch;     // P
    int merge;     // m
    int temporal;  // T
    int grid_h;    // gh (multiple of m)
    int grid_w;    // gw (multiple of m)
};

inline int64_t patch_row_elems(const PatchLayout& L) {
    return int64_t(3) * L.temporal * L.patch * L.patch;
}

// The normalization constants in the form the AVX-512 kernels read them (see patchify.cpp).
struct SimdNorm {
    int recipe;
    bool fast;         // single-precision form; used only if it matches the table
    float k_hi, k_lo;  // the rescale constant as an unevaluated float sum
    double rescale;
    float mean[3];
    float std_[3];
    float inv[3];
    double mean_d[3];  // Kimi's double-precision form: float64 mean and 1 / std
    double inv_d[3];
};

// One normalization in one output dtype, prepared once: the 3 x 256 table (the definition of
// every output value) and the kernel that reproduces it. The SIMD kernels compute the values
// arithmetically; they are chosen only if all 768 of their values equal the table, which is
// checked here, at construction, not per image.
class Normalizer {
public:
    enum class Kernel {
        Table,     // table lookups (no AVX-512 VBMI, or no SIMD form matched the table)
        Simd,      // AVX-512, the reference's double-precision operation order
        SimdFast,  // AVX-512, single precision (matched the table for these constants)
    };
    // Throws std::invalid_argument for parameters build_lut refuses.
    Normalizer(const NormParams& params, DType dtype);

    const NormParams& params() const { return params_; }
    DType dtype() const { return dtype_; }
    Kernel kernel() const { return kernel_; }
    // 3 x 256 values in the element type of dtype(), channel-major.
    const void* lut() const { return lut_; }
    const SimdNorm& simd() const { return simd_; }

private:
    NormParams params_;
    DType dtype_;
    Kernel kernel_ = Kernel::Table;
    SimdNorm simd_{};
    alignas(64) unsigned char lut_[3 * 256 * 4];
};

// Writes the patch rows of one image; cheap to make (the Normalizer did the preparation). The
// Normalizer must outlive it.
class Patchifier {
public:
    Patchifier(const PatchLayout& L, const Normalizer& norm);
    // Writes the m * gw patch rows of merged block row bh. `band` holds image rows
    // [bh * m * P, bh * m * P + band.height) with band.width valid columns; anything outside is
    // padding. band.channels is 3 (RGB) or 4 (RGBX, the 4th byte ignored). dst points at the
    // first patch row of the whole image.
    void block_row(const ImageView& band, int bh, void* dst) const;

private:
    PatchLayout L_;
    const Normalizer* norm_;
    bool simd_ = false;  // the SIMD kernels handle P <= 16
};

}  // namespace smg
