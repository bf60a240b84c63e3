#include "patchify/normalizer.hpp"

#include "fp_env.hpp"

namespace smg {

Normalizer::Normalizer(const NormParams& params, DType dtype) : params_(params), dtype_(dtype) {
    const DefaultFpEnv fp_env;  // the table and the kernels' checks are defined under it
    build_lut(params_, dtype_, lut_);
    if (dtype_ == DType::UInt8) return;  // nothing to normalize: the bytes are copied
    for (size_t i = 0; i < kKernels; ++i) {
        const KernelRow<PatchifyKernel>& k = kPatchifyKernels[i];
        ready_[i] = k.allowed() && k.fn.prepare(params_, dtype_, lut_, preps_[i]);
    }
}

PatchifyChoice Normalizer::kernel_for(int patch) const {
    if (dtype_ == DType::UInt8) return {nullptr, nullptr};
    for (size_t i = 0; i < kKernels; ++i) {
        const KernelRow<PatchifyKernel>& k = kPatchifyKernels[i];
        if (ready_[i] && k.fn.min_patch <= patch && patch <= k.fn.max_patch) return {&k, &preps_[i]};
    }
    // Not reached for a Pipeline's patch sides: the last row (the table) takes them all.
    return {&kPatchifyKernels[kKernels - 1], &preps_[kKernels - 1]};
}

const char* Normalizer::kernel_label(int patch) const {
    const PatchifyChoice c = kernel_for(patch);
    return c.kernel ? c.prep->label : "copy";
}

}  // namespace smg
