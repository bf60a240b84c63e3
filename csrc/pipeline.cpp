#include "pipeline.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "parallel.hpp"
#include "resample/torch_weights.hpp"
#include "scratch.hpp"

namespace smg {

namespace {

constexpr int64_t kMaxSide = 1 << 20;  // far beyond any real image; keeps index math in range
constexpr int kMaxTemporal = 16;

// Runs before norm_ is built, so a bad layout is reported before the table is computed.
Filter checked(Filter f, PassOrder order, Resampler rs, int patch, int merge, int temporal, PatchOrder po) {
    if (!is_valid_filter(f)) throw std::invalid_argument("unknown resampling filter " + std::to_string(int(f)));
    if (!is_valid_resampler(rs)) throw std::invalid_argument("unknown resampler " + std::to_string(int(rs)));
    if (rs == Resampler::Torch && !torch_implements(f))
        throw std::invalid_argument("the torch resampler implements BICUBIC, BILINEAR and LANCZOS only");
    if (!is_valid_pass_order(order)) throw std::invalid_argument("unknown pass order " + std::to_string(int(order)));
    if (merge < 1 || merge > 16 || temporal < 1 || temporal > kMaxTemporal)
        throw std::invalid_argument("patch must be 1..64, merge and temporal 1..16");
    const bool whole_image = merge == 1 && temporal == 1;  // a patch may then be the whole image
    if (patch < 1 || patch > (whole_image ? kMaxImagePatch : kMaxPatch))
        throw std::invalid_argument(
            "patch must be 1..64 (1..4096 with merge 1 and temporal 1), merge and "
            "temporal 1..16");
    if (!is_valid_patch_order(po)) throw std::invalid_argument("unknown patch order " + std::to_string(int(po)));
    if (po == PatchOrder::ChannelLast && !whole_image)
        throw std::invalid_argument("channel-last patches take merge 1 and temporal 1");
    return f;
}

}  // namespace

Pipeline::Pipeline(const NormParams& norm, DType dtype, Filter filter, PassOrder order, Resampler resampler, int patch,
                   int merge, int temporal, PatchOrder patch_order)
    : filter_(checked(filter, order, resampler, patch, merge, temporal, patch_order)),
      order_(order),
      resampler_(resampler),
      patch_(patch),
      merge_(merge),
      temporal_(temporal),
      patch_order_(patch_order),
      norm_(norm, dtype) {}

int64_t Pipeline::output_elems(int resize_w, int resize_h, int grid_h, int grid_w) const {
    if (grid_h < merge_ || grid_w < merge_ || grid_h % merge_ || grid_w % merge_ ||
        int64_t(grid_h) * patch_ > kMaxSide || int64_t(grid_w) * patch_ > kMaxSide)
        throw std::invalid_argument(
            "grid must be a positive multiple of merge, at most 2^20 pixels per side (grid x patch)");
    if (resize_w < 1 || resize_h < 1 || resize_w > int64_t(grid_w) * patch_ || resize_h > int64_t(grid_h) * patch_)
        throw std::invalid_argument("resized image must fit inside the patch grid");
    return int64_t(grid_h) * grid_w * row_elems();
}

void Pipeline::run(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w,
                   void* dst) const {
    run_impl(src, fmt, resize_w, resize_h, 0, 0, grid_h, grid_w, dst, nullptr);
}

void Pipeline::run_placed(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int left, int top,
                          int grid_h, int grid_w, void* dst) const {
    run_impl(src, fmt, resize_w, resize_h, left, top, grid_h, grid_w, dst, nullptr);
}

void Pipeline::run_slot(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w,
                        int slot, int slots, void* dst) const {
    if (slots < 1 || slots > kMaxTemporal || slot < 0 || slot >= slots)
        throw std::invalid_argument("slot must lie in [0, slots) and slots in 1.." + std::to_string(kMaxTemporal));
    if (temporal_ != 1 || patch_order_ != PatchOrder::ChannelFirst || patch_ > kMaxPatch)
        throw std::invalid_argument("run_slot takes a channel-first pipeline of temporal size 1, patch 1..64");
    run_impl(src, fmt, resize_w, resize_h, 0, 0, grid_h, grid_w, dst, nullptr, slot, slots);
}

bool Pipeline::run_producing(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w,
                             void* dst, const Producer& produce) const {
    return run_impl(src, fmt, resize_w, resize_h, 0, 0, grid_h, grid_w, dst, &produce);
}

bool Pipeline::run_impl(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int left, int top,
                        int grid_h, int grid_w, void* dst, const Producer* produce, int slot, int slots) const {
    const WorkScope busy;
    output_elems(resize_w, resize_h, grid_h, grid_w);
    if (left < 0 || top < 0 || int64_t(left) + resize_w > int64_t(grid_w) * patch_ ||
        int64_t(top) + resize_h > int64_t(grid_h) * patch_)
        throw std::invalid_argument("the placed image must lie inside the patch grid (left, top >= 0)");
    if (!is_valid_format(fmt)) throw std::invalid_argument("unknown pixel format " + std::to_string(int(fmt)));
    if (src.channels != format_channels(fmt))
        throw std::invalid_argument("pixel format " + std::to_string(int(fmt)) + " reads " +
                                    std::to_string(format_channels(fmt)) + " channels, the image has " +
                                    std::to_string(src.channels));
    const PatchLayout L{patch_, merge_, temporal_, grid_h, grid_w};
    const Patchifier patchifier(L, norm_, patch_order_);
    // Same size: Pillow's (and torch's) resize is a copy, and so is ours (Resizer's copy mode). The band copy
    // is cheap and sequential; patchifying straight from a large image is not (rows far apart
    // miss the cache on every patch).
    Resizer resizer(src, resize_w, resize_h, filter_, order_, resampler_, /*rgb_out=*/true, fmt);
    // One merged block row (m * P image rows) at a time into a small pooled band that is still
    // in cache when the patchifier reads it.
    const int band_rows = L.merge * L.patch;
    const int C = resizer.out_channels();
    // A band row is the canvas row up to the image's right edge: `left` pixels of 0, then the image.
    const int64_t stride = int64_t(left + resize_w) * C;
    // With a producer, unit 0 produces the source and unit 1 + bh is block row bh. The pool hands
    // out units in order, so the producer is running before any block row waits on its rows (and
    // on one thread it simply runs first).
    RowGate gate;
    bool produced = true;
    const int64_t first = produce ? 1 : 0;
    parallel_for(first + L.grid_h / L.merge, 1, [&](int64_t b, int64_t e) {
        if (produce && b == 0) {
            bool ok = false;
            try {
                ok = (*produce)(gate);
            } catch (...) {
                gate.fail();
                throw;
            }
            if (ok) {
                gate.publish(src.height);
            } else {
                produced = false;
                gate.fail();
            }
            ++b;
        }
        ScratchBuffer band(size_t(stride) * band_rows + 64);
        RowCarry carry;
        uint8_t* const rows = band.as<uint8_t>();
        // With slots: one block row's patch rows, patchified here and scattered into dst.
        const int64_t block_patches = int64_t(L.merge) * L.grid_w;
        const int64_t cell_bytes = int64_t(L.patch) * L.patch * dtype_size(norm_.dtype());
        ScratchBuffer patches(slots > 1 ? size_t(block_patches * 3 * cell_bytes) : 0);
        for (int64_t bh = b - first; bh < e - first; ++bh) {
            const int y0 = int(bh) * band_rows;
            // Canvas rows [a, z) of this block row hold image rows [a - top, z - top); the band
            // holds canvas rows [y0, z), those above the image (and the columns left of it) pixel 0.
            const int a = std::max(y0, top);
            const int z = std::min(y0 + band_rows, top + resize_h);
            const int h = z > a ? z - y0 : 0;
            // One row more than read: a horizontal kernel may load (and ignore) a byte past a row.
            // (Padding-only block rows read nothing.)
            if (produce && h > 0 && !gate.wait(std::min(src.height, resizer.source_rows_end(z - top) + 1))) return;
            if (h > 0) {
                if (a > y0) std::memset(rows, 0, size_t(stride) * size_t(a - y0));
                if (left > 0)
                    for (int y = a; y < z; ++y) std::memset(rows + int64_t(y - y0) * stride, 0, size_t(left) * C);
                resizer.rows(a - top, z - top, rows + int64_t(a - y0) * stride + int64_t(left) * C, stride, &carry);
            }
            const ImageView view{rows, left + resize_w, h, C, stride};
            if (slots == 1) {
                patchifier.block_row(view, int(bh), dst);
                continue;
            }
            patchifier.block_row(view, 0, patches.as<uint8_t>());
            const uint8_t* in = patches.as<uint8_t>();
            uint8_t* out = static_cast<uint8_t*>(dst) + (bh * block_patches * 3 * slots + slot) * cell_bytes;
            for (int64_t cell = 0; cell < block_patches * 3; ++cell, in += cell_bytes, out += slots * cell_bytes)
                std::memcpy(out, in, size_t(cell_bytes));
        }
    });
    return produced;
}

}  // namespace smg
