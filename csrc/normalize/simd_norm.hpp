// The normalization constants in the form the SIMD patchify kernels compute with: single
// precision (the fast form, used only where it reproduces the table) or the reference's own
// double-precision order.
#pragma once

#include "normalize/lut.hpp"

namespace smg {

struct SimdNorm {
    int recipe;        // HfRescaleNormalize or KimiDivideMultiply (the Torch recipes are the first)
    bool fast;         // single-precision form; used only if it matches the table
    float k_hi, k_lo;  // the rescale constant as an unevaluated float sum
    double rescale;
    float mean[3];
    float std_[3];
    float inv[3];
    double mean_d[3];  // Kimi's double-precision form: float64 mean and 1 / std
    double inv_d[3];
};

// The constants of params (effective_params(): two recipes only) in the fast or the exact form.
SimdNorm simd_norm(const NormParams& params, bool fast);

}  // namespace smg
