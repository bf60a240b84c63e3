// One normalization in one output dtype, prepared once: the 3 x 256 table (the definition of every
// output value) and, for each patchify kernel this host may run, its preparation: the SIMD kernels
// compute values arithmetically (or gather them from the table) and are chosen only where all 768
// of their values equal the table, which is checked here, at construction, not per image.
#pragma once

#include <cstddef>
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
    // The first row of the patchify table that is allowed here, takes patches of this side and
    // reproduced the table.
    PatchifyChoice kernel_for(int patch) const;
    // What Pipeline.kernel reports: the chosen kernel's form ("avx512-fast", "avx512",
    // "avx2-fast", "avx2-gather", "neon-fast", "neon", "table"), or "copy" for UInt8.
    const char* kernel_label(int patch) const;

private:
    static constexpr size_t kKernels = std::size(kPatchifyKernels);
    NormParams params_;
    DType dtype_;
    bool ready_[kKernels] = {};  // the row is allowed here and its prepare() succeeded
    PatchifyPrep preps_[kKernels];
    alignas(64) unsigned char lut_[3 * 256 * 4];
};

}  // namespace smg
