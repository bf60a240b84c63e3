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

// The normalization: `lut` (3 x 256 in the output dtype, from build_lut) is the definition; the
// recipe parameters let the SIMD kernel compute the same values arithmetically, which it does
// only after checking all 768 of them against the table.
struct Normalization {
    const void* lut;
    LutRecipe recipe;
    double rescale;
    double mean[3];
    double std_[3];
};

// Prepared per call: picks the kernel (SIMD when its values match the table bit for bit).
class Patchifier {
public:
    Patchifier(const PatchLayout& L, DType dtype, const Normalization& norm);
    // Writes the m * gw patch rows of merged block row bh. `band` holds image rows
    // [bh * m * P, bh * m * P + band.height) with band.width valid columns; anything outside is
    // padding. band.channels is 3 (RGB) or 4 (RGBX, the 4th byte ignored). dst points at the
    // first patch row of the whole image.
    void block_row(const ImageView& band, int bh, void* dst) const;

private:
    PatchLayout L_;
    DType dtype_;
    Normalization norm_;
    bool simd_ = false;
    bool fast_ = false;  // the single-precision normalization matched every table value
};


}  // namespace smg
