#include "planar.hpp"

#include <cstring>

#include "parallel.hpp"

namespace smg {

namespace {

// One grid row of patches into its patch rows of the three planes, reading the patches in order.
// kRun: the bytes of one patch row of one channel when known at compile time (the copy is then a
// few vector moves), else 0 and run says it.
template <int64_t kRun>
void lay_grid_row(const uint8_t* in, uint8_t* out, int grid_w, int patch, int64_t run, int64_t row_bytes,
                  int64_t plane_bytes) {
    const int64_t n = kRun ? kRun : run;
    for (int gx = 0; gx < grid_w; ++gx) {
        for (int c = 0; c < 3; ++c) {
            uint8_t* dst = out + c * plane_bytes + gx * n;
            for (int py = 0; py < patch; ++py, in += n) std::memcpy(dst + py * row_bytes, in, size_t(n));
        }
    }
}

}  // namespace

void patches_to_planar(const void* patches, int grid_h, int grid_w, int patch, int elem_size, void* canvas,
                       int64_t canvas_h, int64_t canvas_w) {
    const auto* in = static_cast<const uint8_t*>(patches);
    auto* out = static_cast<uint8_t*>(canvas);
    const int64_t run = int64_t(patch) * elem_size;              // bytes of one patch row of one channel
    const int64_t grid_row = int64_t(grid_w) * 3 * patch * run;  // bytes of one grid row of patches
    const int64_t row_bytes = canvas_w * elem_size;              // bytes of one canvas row
    const int64_t plane_bytes = canvas_h * row_bytes;
    const int64_t image_bytes = int64_t(grid_w) * run;  // bytes of an image row inside a canvas row
    const int64_t image_h = int64_t(grid_h) * patch;
    // Units 0..grid_h-1: a grid row (its patch rows, and the zeros right of them); unit grid_h:
    // the zero rows below the grid.
    parallel_for(grid_h + 1, 1, [&](int64_t b, int64_t e) {
        for (int64_t gy = b; gy < e; ++gy) {
            if (gy == grid_h) {
                for (int c = 0; c < 3; ++c)
                    std::memset(out + c * plane_bytes + image_h * row_bytes, 0,
                                size_t((canvas_h - image_h) * row_bytes));
                continue;
            }
            const uint8_t* src = in + gy * grid_row;
            uint8_t* dst = out + gy * patch * row_bytes;
            if (run == 64)
                lay_grid_row<64>(src, dst, grid_w, patch, run, row_bytes, plane_bytes);
            else if (run == 32)
                lay_grid_row<32>(src, dst, grid_w, patch, run, row_bytes, plane_bytes);
            else
                lay_grid_row<0>(src, dst, grid_w, patch, run, row_bytes, plane_bytes);
            if (row_bytes > image_bytes)
                for (int c = 0; c < 3; ++c)
                    for (int py = 0; py < patch; ++py)
                        std::memset(dst + c * plane_bytes + py * row_bytes + image_bytes, 0,
                                    size_t(row_bytes - image_bytes));
        }
    });
}

}  // namespace smg
