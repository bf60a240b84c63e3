// Fused normalize + patchify: resized uint8 RGB -> the encoder's patch layout in one pass, each
// value normalized exactly as the reference does and stored in the output dtype.
#pragma once

#include <cstdint>

#include "image.hpp"
#include "normalize/lut.hpp"

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

inline int64_t patch_row_elems(const PatchLayout& L) { return int64_t(3) * L.temporal * L.patch * L.patch; }

// The normalization constants in the form the SIMD kernels read them (see patchify/avx512.cpp
// and patchify/avx2.cpp).
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

// How the AVX2 kernel computes a value: the single-precision form (as the AVX-512 fast form),
// or a gather from the table (exact by construction; on AVX2 hosts faster than the reference's
// double-precision order for Kimi, and about as fast for the others). Whichever is used has
// been checked against all 768 table values.
enum class Avx2Form : int { Fast = 0, Gather = 1 };

// One normalization in one output dtype, prepared once: the 3 x 256 table (the definition of
// every output value) and the kernels that reproduce it. The SIMD kernels compute the values
// arithmetically (or gather them from the table); they are chosen only if all 768 of their values
// equal the table, which is checked here, at construction, not per image.
class Normalizer {
public:
    enum class Kernel {
        Table,       // table lookups, portable (the cap or the CPU allows no SIMD kernel)
        Avx2Gather,  // AVX2, gathers from the table
        Avx2Fast,    // AVX2, single precision (matched the table for these constants)
        Simd,        // AVX-512 VBMI, the reference's double-precision operation order (P <= 16)
        SimdFast,    // AVX-512 VBMI, single precision (P <= 16)
        Copy,        // uint8: the bytes copied into the layout (patchify/copy.cpp)
    };
    static const char* kernel_name(Kernel k);  // "avx512-fast", "avx2-gather", "table", "copy", ...
    // Throws std::invalid_argument for parameters build_lut refuses.
    Normalizer(const NormParams& params, DType dtype);

    const NormParams& params() const { return params_; }
    DType dtype() const { return dtype_; }
    // The kernel that patches of side `patch` use (the AVX-512 kernels take P <= 16; uint8
    // always copies).
    Kernel kernel_for(int patch) const;
    // 3 x 256 values in the element type of dtype(), channel-major.
    const void* lut() const { return lut_; }
    const SimdNorm& simd() const { return simd_; }        // the AVX-512 kernels' constants
    const SimdNorm& simd_avx2() const { return simd2_; }  // the AVX2 kernel's constants
    Avx2Form avx2_form() const { return form2_; }

private:
    NormParams params_;
    DType dtype_;
    Kernel avx512_ = Kernel::Table;  // Table, Simd or SimdFast
    Kernel avx2_ = Kernel::Table;    // Table, Avx2Gather or Avx2Fast
    Avx2Form form2_ = Avx2Form::Gather;
    SimdNorm simd_{};
    SimdNorm simd2_{};
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
    Normalizer::Kernel kernel_;  // norm.kernel_for(L.patch)
};

}  // namespace smg
