// One decoded image (RGB, or a format converted while read) to encoder input: exact resize
// (Pillow's or torch's arithmetic) into a pooled scratch image,
// then the fused normalize + patchify straight into the caller's destination.
#pragma once

#include <cstdint>
#include <functional>

#include "convert.hpp"
#include "image.hpp"
#include "normalize/lut.hpp"
#include "patchify/patchifier.hpp"
#include "resample/resizer.hpp"
#include "row_gate.hpp"

namespace smg {

// What stays fixed for one processor and output dtype: resampling filter and pass order,
// normalization, patch size, merge and temporal copies. Validated and prepared once (the
// normalization table and its kernel choice included); run() then takes only what differs per
// image. Immutable after construction, so any number of threads may run() at once.
class Pipeline {
public:
    // Throws std::invalid_argument for an unknown filter, pass order, resampler, recipe or dtype,
    // a filter the resampler does not implement, patch outside 1..64 (1..4096 with merge 1 and
    // temporal 1: a whole channel-first image), merge or temporal outside 1..16, PatchOrder::ChannelLast
    // with merge or temporal other than 1, or what build_lut refuses.
    Pipeline(const NormParams& norm, DType dtype, Filter filter, PassOrder order, Resampler resampler, int patch,
             int merge, int temporal, PatchOrder patch_order = PatchOrder::ChannelFirst);

    // Elements run() writes for these sizes. Throws std::invalid_argument unless the grid is a
    // positive multiple of merge and the resized image fits inside it.
    int64_t output_elems(int resize_w, int resize_h, int grid_h, int grid_w) const;

    // Resizes src, read in pixel format fmt (src.channels == format_channels(fmt); formats other
    // than RGB / RGBX are converted to RGB while the resampler reads), to resize_w x resize_h and
    // writes its grid_h * grid_w patch rows to dst, which must hold output_elems(...) elements of
    // dtype(). Throws std::invalid_argument for sizes output_elems() refuses, an unknown format
    // or a channel count that does not match it.
    void run(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w,
             void* dst) const;

    // run() with the resized image placed at (left, top) on the grid's canvas (grid_h * patch rows,
    // grid_w * patch columns): canvas pixels it does not cover are padding (pixel value 0), as the
    // cells past it are in run(). Throws std::invalid_argument for what run() refuses, a negative
    // left or top, or a placed image that does not fit inside the grid.
    void run_placed(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int left, int top, int grid_h,
                    int grid_w, void* dst) const;

    // run() for one frame of a video's temporal group: this pipeline (temporal 1, channel-first)
    // writes the frame into a layout of `slots` frames per patch row ((3, slots, P * P), a
    // temporal patchify's), into frame `slot`'s places only, leaving the others as they are. dst
    // holds output_elems(...) * slots elements. Each block row is patchified into a small pooled
    // buffer still in cache and scattered from there. Throws std::invalid_argument for what run()
    // refuses, a slot outside [0, slots), slots outside 1..16, or a pipeline whose temporal size
    // is not 1 or whose patch order is channel-last.
    void run_slot(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w, int slot,
                  int slots, void* dst) const;

    // Fills src's rows (a decoder), publishing them on the gate as they are final; false: src is
    // not valid (the output is then incomplete and must be discarded).
    using Producer = std::function<bool(RowGate&)>;
    // run() on an image that produce() is still writing: produce() runs first, on one thread,
    // while the others resize and patchify every band whose source rows are already published;
    // it then joins them. Same output as producing src and then calling run(); returns what
    // produce() returned.
    bool run_producing(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int grid_h, int grid_w,
                       void* dst, const Producer& produce) const;

    const Normalizer& normalizer() const { return norm_; }
    DType dtype() const { return norm_.dtype(); }
    Filter filter() const { return filter_; }
    PassOrder pass_order() const { return order_; }
    Resampler resampler() const { return resampler_; }
    int patch() const { return patch_; }
    int merge() const { return merge_; }
    int temporal() const { return temporal_; }
    PatchOrder patch_order() const { return patch_order_; }
    // Elements of one patch row: 3 * temporal * patch * patch.
    int64_t row_elems() const { return int64_t(3) * temporal_ * patch_ * patch_; }

private:
    // slots > 1: run_slot's layout, frame `slot` of it.
    bool run_impl(const ImageView& src, PixelFormat fmt, int resize_w, int resize_h, int left, int top, int grid_h,
                  int grid_w, void* dst, const Producer* produce, int slot = 0, int slots = 1) const;

    Filter filter_;
    PassOrder order_;
    Resampler resampler_;
    int patch_, merge_, temporal_;
    PatchOrder patch_order_;
    Normalizer norm_;
};

}  // namespace smg
