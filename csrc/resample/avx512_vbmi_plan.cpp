// The AVX-512 VBMI horizontal plan (resample/avx512_vbmi.hpp): how each group of 16 output pixels
// reads its source (one window, two, or pixel by pixel; in the row's pixels or its channel
// planes), the permute offsets and the weights in the kernels' form.
#include "resample/kernels.hpp"

#if SMG_X86
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "resample/avx512_vbmi.hpp"
#include "resample/fixed.hpp"

namespace smg {

namespace {

// The window of output pixels [x0, x0 + n): its first source pixel, and whether every tap of
// those pixels lies in the 128 bytes from there.
std::pair<int, bool> window(const AxisWeights& kn, int x0, int n, int C) {
    // Trimmed windows (see AxisWeights) need not start in increasing order.
    const auto [lo, hi] = std::minmax_element(kn.start.begin() + x0, kn.start.begin() + x0 + n);
    return {*lo, (*hi - *lo + kn.taps) * C <= 128};
}

// How each group of 16 output pixels reads its source, and from where: p's pairs, base, base_hi
// and fits. Returns the number of groups left to the per-pixel path.
int classify_groups(const AxisWeights& kn, int out_w, int C, VbmiPlan& p) {
    const int groups = (out_w + 15) / 16;
    p.pairs = (kn.taps + 1) / 2;
    p.base.assign(groups, 0);
    p.base_hi.assign(groups, 0);
    p.fits.assign(groups, Fit::Pixels);
    int pixels = 0;
    for (int g = 0; g < groups; ++g) {
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        const auto [base, whole] = window(kn, x0, n, C);
        p.base[g] = p.base_hi[g] = base;
        if (whole) {
            p.fits[g] = Fit::Whole;
        } else if (n > 8) {
            const auto [base_lo, lo_fits] = window(kn, x0, 8, C);
            const auto [base_hi, hi_fits] = window(kn, x0 + 8, n - 8, C);
            if (lo_fits && hi_fits) {
                p.fits[g] = Fit::Halves;
                p.base[g] = base_lo;
                p.base_hi[g] = base_hi;
            }
        }
        pixels += p.fits[g] == Fit::Pixels;
    }
    return pixels;
}

// The vpermi2b offsets and the split weights of every group classify_groups placed in windows.
void fill_vbmi_plan(const AxisWeights& kn, int out_w, VbmiPlan& p, int C) {
    const int groups = int(p.fits.size()), taps = kn.taps;
    p.offsets.assign(groups, Vec64{});
    p.weights.assign(size_t(groups) * p.pairs * 2, Vec64{});
    for (int g = 0; g < groups; ++g) {
        if (p.fits[g] == Fit::Pixels) continue;
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        for (int i = 0; i < n; ++i) {
            const int off = C * (kn.start[x0 + i] - (i < 8 ? p.base[g] : p.base_hi[g]));
            p.offsets[g].b[4 * i] = uint8_t(off);
            p.offsets[g].b[4 * i + 2] = uint8_t(off + C);
            for (int j = 0; j < taps; ++j) {
                const int32_t w = kn.weights[size_t(x0 + i) * taps + j];
                int16_t lo = int16_t(w & 2047), hi = int16_t(w >> 11);
                if (p.shift >= 0) {  // the int16 weight alone (exact: w is a multiple of 2^shift)
                    lo = int16_t(w >> p.shift);
                    hi = 0;
                }
                Vec64* pair = &p.weights[(size_t(g) * p.pairs + j / 2) * 2];
                std::memcpy(&pair[0].b[4 * i + 2 * (j % 2)], &lo, 2);
                std::memcpy(&pair[1].b[4 * i + 2 * (j % 2)], &hi, 2);
            }
        }
    }
}

}  // namespace

std::unique_ptr<HorizontalPlan> horizontal_plan_vbmi(const AxisWeights& kn, int, int out_w, int C, int) {
    if (C < 3) return nullptr;
    auto p = std::make_unique<VbmiPlan>();
    // Downscales whose groups do not fit even two 128-byte windows (past ~4x in RGB, ~3x in RGBX)
    // read the row's channel planes instead, where a window of one channel spans C times the
    // pixels (the split into planes included, faster than the AVX2 kernel there; between ~2x and
    // ~4x the pixels' two windows stay, as a pipeline's bands ran slower from planes: Gemma 3n's
    // 2.5x, measured by bench/gate.py). Groups that fit neither take the per-pixel path, several
    // times slower than the AVX2 kernel's layouts: past one group in 16, the next kernel of the
    // table takes the resize (decided before the weights are laid out).
    const int64_t groups = (int64_t(out_w) + 15) / 16;
    const int64_t pixels = classify_groups(kn, out_w, C, *p);
    if (pixels * 16 > groups) {
        p->planar = true;
        if (int64_t(classify_groups(kn, out_w, 1, *p)) * 16 > groups) return nullptr;
    }
    p->shift = int16_weight_shift(kn);
    // Without the int16 form every weight must split (|w| < 2^26; no real filter's comes close).
    int16_t lo, hi;
    if (p->shift < 0)
        for (const int32_t w : kn.weights)
            if (!split_weight(w, lo, hi)) return nullptr;
    fill_vbmi_plan(kn, out_w, *p, p->planar ? 1 : C);
    return p;
}

}  // namespace smg

#endif
