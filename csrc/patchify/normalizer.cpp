#include "patchify/normalizer.hpp"

#include <vector>

#include "fp_env.hpp"
#include "patchify/tuning.hpp"
#include "tune.hpp"

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

PatchifyChoice Normalizer::kernel_for(int patch, int merge, int temporal, PatchOrder order, bool tune) const {
    if (dtype_ == DType::UInt8) return {nullptr, nullptr};
    const bool fits = 0 < patch && patch < 256 && 0 < merge && merge < 256 && 0 < temporal && temporal < 256;
    const uint64_t shape = fits ? uint64_t(order == PatchOrder::ChannelLast) << 24 | uint64_t(temporal) << 16 |
                                      uint64_t(merge) << 8 | uint64_t(patch)
                                : 0;
    if (tune && shape != 0) {
        const uint64_t hit = tuned_.load(std::memory_order_acquire);
        if ((hit & kTunedSet) && (hit & 0xffffffffu) == shape) {
            const size_t i = size_t(hit >> 32 & 0xff);
            return {&kPatchifyKernels[i], &preps_[i]};
        }
    }
    std::vector<PatchifyChoice> candidates;
    for (size_t i = 0; i < kKernels; ++i) {
        const KernelRow<PatchifyKernel>& k = kPatchifyKernels[i];
        const bool takes_order = order == PatchOrder::ChannelFirst || k.fn.channels_last || i == kKernels - 1;
        if (ready_[i] && takes_order && k.fn.min_patch <= patch && patch <= k.fn.max_patch)
            candidates.push_back({&k, &preps_[i]});
    }
    // Not reached for a Pipeline's patch sides: the last row (the table) takes them all.
    if (candidates.empty()) return {&kPatchifyKernels[kKernels - 1], &preps_[kKernels - 1]};
    if (candidates.size() == 1 || !tune || !tuning_enabled() || patch > kMaxPatch) return candidates[0];
    const PatchifyChoice c = candidates[tune_patchify(candidates, dtype_, lut_, patch, merge, temporal, order)];
    if (shape != 0)
        tuned_.store(kTunedSet | uint64_t(c.kernel - kPatchifyKernels) << 32 | shape, std::memory_order_release);
    return c;
}

const char* Normalizer::kernel_label(int patch, int merge, int temporal, PatchOrder order, bool tune) const {
    const PatchifyChoice c = kernel_for(patch, merge, temporal, order, tune);
    if (!c.kernel) return "copy";
    return order == PatchOrder::ChannelLast && !c.kernel->fn.channels_last ? "table" : c.prep->label;
}

}  // namespace smg
