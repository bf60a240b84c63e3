// The encoder's patch layout: where each pixel of a resized image goes in the output rows.
#pragma once

#include <cstdint>

namespace smg {

constexpr int kMaxPatch = 64;  // the largest patch side a Pipeline takes
// With merge 1 and temporal 1 one patch may be a whole square image: a grid of 1 x 1 patches of
// side P is the channel-first (3, P, P) image (Gemma 3's SigLIP input), up to this side.
constexpr int kMaxImagePatch = 4096;

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

// Where a patch's values go inside its row. ChannelFirst: the column order above. ChannelLast
// (merge 1 and temporal 1 only): column (py*P + px)*3 + c, the patch's pixels as they lie in an
// RGB image (SigLIP 2's and Gemma 4's patches), rows in raster order over the grid.
enum class PatchOrder : int { ChannelFirst = 0, ChannelLast = 1 };

inline bool is_valid_patch_order(PatchOrder o) { return o == PatchOrder::ChannelFirst || o == PatchOrder::ChannelLast; }

inline int64_t patch_row_elems(const PatchLayout& L) { return int64_t(3) * L.temporal * L.patch * L.patch; }

}  // namespace smg
