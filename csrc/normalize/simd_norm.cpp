#include "normalize/simd_norm.hpp"

namespace smg {

SimdNorm simd_norm(const NormParams& params, bool fast) {
    const NormParams p = effective_params(params);  // two recipes only from here on
    SimdNorm s{};
    s.fast = fast;
    const double k = p.recipe == LutRecipe::HfRescaleNormalize ? p.rescale : 1.0 / 255.0;
    s.k_hi = float(k);
    s.k_lo = float(k - double(s.k_hi));
    s.recipe = int(p.recipe);
    s.rescale = p.rescale;
    for (int c = 0; c < 3; ++c) {
        s.mean[c] = float(p.mean[c]);
        s.std_[c] = float(p.std_[c]);
        s.mean_d[c] = p.mean[c];
        s.inv_d[c] = 1.0 / p.std_[c];
        // The fast form's multiplier: Kimi's float64 1 / std rounded once (exact for 0.5).
        s.inv[c] = p.recipe == LutRecipe::HfRescaleNormalize ? 1.0f / s.std_[c] : float(s.inv_d[c]);
    }
    return s;
}

}  // namespace smg
