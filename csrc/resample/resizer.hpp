// Exact 8-bit resampling. Pillow (libImaging/Resample.c and the NEAREST affine path of
// Geometry.c): same double-precision coefficients, same 22-bit fixed-point weights, same uint8
// intermediate between the two separable passes, same skipped passes and pass order. torch's
// uint8 antialiased resize (what torchvision runs on CPU) through the same row kernels, with
// its own weights (resample/torch_weights.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "convert.hpp"
#include "image.hpp"
#include "resample/shape_cache.hpp"
#include "resample/weights.hpp"
#include "scratch.hpp"

namespace smg {

enum class PassOrder : int {
    HorizontalFirst = 0,  // Pillow <= 12: horizontal pass, then vertical
    Pillow13 = 1,         // Pillow 13: vertical first when the height shrinks by more than 2x the width
};

// Whose arithmetic a resize reproduces.
enum class Resampler : int {
    Pillow = 0,  // Pillow's Resample.c (pass order per PassOrder)
    Torch = 1,   // torch's uint8 antialiased interpolate on CPU (BICUBIC, BILINEAR; horizontal first)
};

bool is_valid_pass_order(PassOrder order);
bool is_valid_resampler(Resampler r);

// True when the vertical pass runs before the horizontal one for this size change.
bool vertical_first(int in_w, int in_h, int out_w, int out_h, PassOrder order);

// Horizontal-pass rows kept from one Resizer::rows call for the next on the same thread:
// consecutive bands of a horizontal-first resize share a few source rows (the vertical taps
// overlap), which are then moved instead of recomputed. Holds a pooled block until destroyed.
// Meant for one Resizer's calls (it recognizes the Resizer by address, so it must not outlive it).
class RowCarry {
public:
    RowCarry() = default;
    ~RowCarry() { scratch_give(block_); }
    RowCarry(const RowCarry&) = delete;
    RowCarry& operator=(const RowCarry&) = delete;

private:
    friend class Resizer;
    Block block_{};
    const void* owner_ = nullptr;  // the Resizer whose rows these are
    int first_ = 0;                // source row held in the first row of block_
    int count_ = 0;                // rows held
    int64_t stride_ = 0;
};

// A resize whose output is produced in bands: rows() computes any range of output rows (both
// passes, through a small pooled intermediate that stays in cache), so callers can consume each
// band while it is hot. Thread-safe for disjoint ranges. src must stay valid while it lives.
class Resizer {
public:
    // rgb_out: for a 4-channel (RGBX) source, output 3 channels where a horizontal pass makes
    // that free (see out_channels()); the pad byte is never read by the RGB consumers.
    // Reads src's channels as they are (1..4, each filtered on its own). Throws
    // std::invalid_argument for an unknown resampler, or a filter it does not implement.
    Resizer(const ImageView& src, int out_w, int out_h, Filter f, PassOrder order, Resampler rs, bool rgb_out = false);
    // Reads src in pixel format fmt (src.channels must be format_channels(fmt)). RGB and RGBX are
    // read in place; any other format is converted to RGB a band of source rows at a time into
    // pooled scratch (never a full-size copy), and the output then has 3 channels. The
    // conversion comes before either resampler, as the references convert before resizing.
    Resizer(const ImageView& src, int out_w, int out_h, Filter f, PassOrder order, Resampler rs, bool rgb_out,
            PixelFormat fmt);
    ~Resizer();
    Resizer(const Resizer&) = delete;
    Resizer& operator=(const Resizer&) = delete;
    // carry (optional, one per thread): rows kept from this Resizer's previous call with it.
    void rows(int y0, int y1, uint8_t* out, int64_t out_stride, RowCarry* carry = nullptr) const;
    int out_channels() const;
    // Source rows [0, n) hold everything output rows [0, y1) read: n for y1 in 0..out_h.
    int source_rows_end(int y1) const;

    struct Impl;  // defined in resizer.cpp (and kept there, per shape, by the shape cache)

private:
    std::unique_ptr<Impl> impl_;
};

// The shape cache (resample/shape_cache.hpp): made, with its fork() handlers, at module import;
// its counters; emptied (its hit and miss counters kept).
void install_shape_cache_fork_handlers();
ShapeCacheStats shape_cache_stats();
void shape_cache_clear();

// Resizes src into dst (both with the same channel count, 1..4, non-overlapping). Each channel
// is filtered on its own, as Pillow (and torch, per plane) do for L, RGB, RGBX and CMYK. Runs on
// the thread pool.
void resize(const ImageView& src, const MutImageView& dst, Filter f, PassOrder order, Resampler rs = Resampler::Pillow);

}  // namespace smg
