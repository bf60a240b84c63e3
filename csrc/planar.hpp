// Whole channel-first images from patch rows: a patch grid laid out as one (3, H, W) canvas.
#pragma once

#include <cstdint>

namespace smg {

// Lays the row-major grid_h x grid_w patches (each channel-first (3, patch, patch), elem_size-byte
// values, as Pipeline::run writes them with merge 1 and temporal 1) out as the channel-first
// image (3, canvas_h, canvas_w): the grid's pixels at its top left, every other value zero bytes.
// Requires canvas_h >= grid_h * patch, canvas_w >= grid_w * patch and non-overlapping buffers;
// runs on the thread pool.
void patches_to_planar(const void* patches, int grid_h, int grid_w, int patch, int elem_size, void* canvas,
                       int64_t canvas_h, int64_t canvas_w);

}  // namespace smg
