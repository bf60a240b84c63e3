// One normalization in one output dtype, prepared once: the 3 x 256 table (the definition of every
// output value) and, for each patchify kernel this host may run, its preparation: the SIMD kernels
// compute values arithmetically (or gather them from the table) and are chosen only where all 768
// of their values equal the table, which is checked here, at construction, not per image.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "dispatch.hpp"
#include "normalize/lut.hpp"
#include "patchify/kernels.hpp"

namespace smg {

// The kernel patches of one size use, with its preparation; kernel is null for UInt8, whose
// bytes are copied into the layout (patchify/copy.hpp).
struct PatchifyChoice {
    const KernelRow<PatchifyKernel>* kernel;
    const PatchifyPrep* prep;
};

class Normalizer {
public:
    // Throws std::invalid_argument for parameters build_lut refuses.
    Normalizer(const NormParams& params, DType dtype);

    const NormParams& params() const { return params_; }
    DType dtype() const { return dtype_; }
    // 3 x 256 values in the element type of dtype(), channel-major.
    const void* lut() const { return lut_; }
    // The kernel for patches of this side, merge, temporal copies and order: among the rows of
    // the patchify table that are allowed here, take patches of this side (in this order: a row
    // without a channel-last form leaves those patches to the table) and reproduced the table,
    // the fastest on this CPU (tune.hpp; whole-image sides above kMaxPatch are not timed), or
    // with tuning off (or tune false) the first.
    PatchifyChoice kernel_for(int patch, int merge, int temporal, PatchOrder order, bool tune = true) const;
    // What Pipeline.kernel reports: the chosen kernel's form ("avx512-fast", "avx512",
    // "avx2-fast", "avx2-gather", "neon-fast", "neon", "table"), or "copy" for UInt8.
    const char* kernel_label(int patch, int merge, int temporal, PatchOrder order, bool tune = true) const;

private:
    static constexpr size_t kKernels = std::size(kPatchifyKernels);
    NormParams params_;
    DType dtype_;
    bool ready_[kKernels] = {};  // the row is allowed here and its prepare() succeeded
    // The last tuned choice, read without the tuning table's lock (a Pipeline asks for one shape
    // on every run): 0, or kTunedSet | the row index << 32 | order << 24 | temporal << 16 |
    // merge << 8 | patch, for a shape whose fields fit those bytes.
    static constexpr uint64_t kTunedSet = uint64_t(1) << 63;
    mutable std::atomic<uint64_t> tuned_{0};
    static_assert(kKernels <= 256, "tuned_ holds a row index in one byte");
    static_assert(std::atomic<uint64_t>::is_always_lock_free);
    PatchifyPrep preps_[kKernels];
    alignas(64) unsigned char lut_[3 * 256 * 4];
};

}  // namespace smg
