#include "preprocess.hpp"

#include <algorithm>

#include "parallel.hpp"
#include "scratch.hpp"

namespace smg {

void preprocess(const ImageView& src, const PreprocessSpec& spec, void* dst) {
    const PatchLayout& L = spec.layout;
    const Patchifier patchifier(L, spec.dtype, spec.norm);
    // Same size: Pillow's resize is a copy, and so is ours (Resizer's copy mode). The band copy
    // is cheap and sequential; patchifying straight from a large image is not (rows far apart
    // miss the cache on every patch).
    Resizer resizer(src, spec.resize_w, spec.resize_h, spec.filter, spec.order, /*rgb_out=*/true);
    // One merged block row (m * P image rows) at a time into a small pooled band that is still
    // in cache when the patchifier reads it.
    const int band_rows = L.merge * L.patch;
    const int C = resizer.out_channels();
    const int64_t stride = int64_t(spec.resize_w) * C;
    parallel_for(L.grid_h / L.merge, 1, [&](int64_t b, int64_t e) {
        ScratchBuffer band(size_t(stride) * band_rows + 64);
        RowCarry carry;
        for (int64_t bh = b; bh < e; ++bh) {
            const int y0 = int(bh) * band_rows;
            const int h = std::max(0, std::min(band_rows, spec.resize_h - y0));
            if (h > 0) resizer.rows(y0, y0 + h, band.as<uint8_t>(), stride, &carry);
            patchifier.block_row(ImageView{band.as<uint8_t>(), spec.resize_w, h, C, stride}, int(bh), dst);
        }
    });
}

}  // namespace smg
