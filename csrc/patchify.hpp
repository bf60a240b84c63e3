// Fused normalize + patchify: resized uint8 RGB -> the encoder's patch layout in one pass, each
// value looked up in a per-channel table (normalize.hpp) and stored in the output dtype.
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

// Writes grid_h * grid_w rows of patch_row_elems(L) elements to dst. img has 3 channels and may
// be smaller than the grid (the rest is padding). lut is 3 x 256 elements of dtype.
void patchify(const ImageView& img, const PatchLayout& L, DType dtype, const void* lut, void* dst);

}  // namespace smg
