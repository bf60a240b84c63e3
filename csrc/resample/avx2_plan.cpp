// The AVX2 horizontal kernel's plan (resample/avx2.hpp): for each chunk of 32 output bytes, where
// its loads start, the vpshufb controls that place source bytes as int16 pairs, and the split
// weights; the cheapest layout that leaves at most the row's edge to the per-byte path.
#include "resample/kernels.hpp"

#if SMG_X86
#include <algorithm>
#include <cstring>

#include "resample/avx2.hpp"
#include "resample/fixed.hpp"

namespace smg {

namespace {

// One layout's plan (shift: int16_weight_shift(kn)); unfit_bytes: output bytes left to the per-byte
// path.
Avx2HPlan plan_layout(const AxisWeights& kn, int in_w, int out_w, int C, int CO, bool pixels, bool shared, int shift,
                      int64_t& unfit_bytes) {
    Avx2HPlan p;
    p.pixels = pixels;
    p.shared = shared;
    p.C = C;
    p.CO = CO;
    p.pairs = (kn.taps + 1) / 2;
    const int taps = kn.taps;
    const int64_t n_out = int64_t(out_w) * CO;
    const int chunk_out = pixels ? 8 * CO : 32;
    p.chunks = int((n_out + chunk_out - 1) / chunk_out);
    const size_t groups = size_t(p.chunks) * 4;
    p.base.assign(groups * 2, 0);
    p.masks.assign(groups, Vec32{});
    p.weights.assign(groups * p.pairs * 2, Vec32{});
    p.fits.assign(p.chunks, 0);
    p.row_bytes = int64_t(in_w) * C;
    p.shift = shift;
    // The highest base whose loads (16 bytes at base + 2 * q * C) all stay inside the row; a
    // chunk with a higher base (or a narrow row's empty half at 0) reads the padded tail copy.
    const int64_t last_base = p.row_bytes - 16 - int64_t(2) * (p.pairs - 1) * C;
    unfit_bytes = 0;
    for (int k = 0; k < p.chunks; ++k) {
        bool fits = true, tail = last_base < 0;
        for (int j = 0; j < 4 && fits; ++j) {
            const size_t g = size_t(k) * 4 + j;
            // Slot 4h + l of the group: its output pixel x (-1: none) and channel c.
            int x[8], c[8];
            int64_t a[8];
            for (int s = 0; s < 8; ++s) {
                if (pixels) {
                    x[s] = 8 * k + 2 * j + s / 4;
                    c[s] = s % 4;
                    if (x[s] >= out_w || c[s] >= CO) x[s] = -1;
                } else {
                    const int64_t b = int64_t(32) * k + 8 * j + s;
                    x[s] = b < n_out ? int(b / CO) : -1;
                    c[s] = int(b % CO);
                }
                a[s] = x[s] < 0 ? -1 : int64_t(C) * kn.start[x[s]] + c[s];
            }
            // Each half's window (or, shared, one for both): every slot's two bytes
            // a - base and a - base + C within its 16 bytes.
            for (int h = 0; h < 2; ++h) {
                const int s0 = shared ? 0 : 4 * h, s1 = shared ? 8 : 4 * h + 4;
                int64_t amin = INT64_MAX, amax = INT64_MIN;
                for (int s = s0; s < s1; ++s) {
                    if (x[s] < 0) continue;
                    amin = std::min(amin, a[s]);
                    amax = std::max(amax, a[s]);
                }
                if (amin == INT64_MAX) continue;  // past the row's end: zero mask and weights
                // Any base in [amax + C - 15, amin] holds the slots; the lowest within the row's
                // loads, else the lowest at all (the fewest bytes past the row's end).
                const int64_t base = std::max({std::min(amin, last_base), amax + C - 15, int64_t(0)});
                if (base > amin) {
                    fits = false;
                    break;
                }
                if (base > last_base) tail = true;
                p.base[2 * g + h] = int32_t(base);
                if (shared) p.base[2 * g + 1] = int32_t(base);
                for (int s = s0; s < s1; ++s) {
                    uint8_t* m = p.masks[g].b + 4 * s;
                    if (x[s] < 0) {
                        std::memset(m, 0x80, 4);  // 0x80: vpshufb writes zero
                        continue;
                    }
                    const uint8_t pair[4] = {uint8_t(a[s] - base), 0x80, uint8_t(a[s] - base + C), 0x80};
                    std::memcpy(m, pair, 4);
                    const int32_t* w = &kn.weights[size_t(x[s]) * taps];
                    for (int t = 0; t < taps; ++t) {
                        int16_t lo, hi;
                        if (p.shift >= 0) {  // the int16 weight alone (exact: a multiple of 2^shift)
                            lo = int16_t(w[t] >> p.shift);
                            hi = 0;
                        } else if (!split_weight(w[t], lo, hi)) {
                            fits = false;
                        }
                        Vec32* wq = &p.weights[(g * p.pairs + t / 2) * 2];
                        std::memcpy(&wq[0].b[4 * s + 2 * (t % 2)], &lo, 2);
                        std::memcpy(&wq[1].b[4 * s + 2 * (t % 2)], &hi, 2);
                    }
                }
                if (shared) break;
            }
        }
        p.fits[k] = fits ? (tail ? 2 : 1) : 0;
        if (fits && tail) p.tail = true;
        if (!fits) unfit_bytes += std::min<int64_t>(chunk_out, n_out - int64_t(k) * chunk_out);
    }
    return p;
}

Avx2HPlan best_layout(const AxisWeights& kn, int in_w, int out_w, int C, int CO) {
    // Cheapest first: one window per group (one load per tap pair, no insert) where a group's 8
    // output bytes read within 16 source bytes (upscaling and mild downscaling); else one per
    // half; else, for 3 output channels, whole pixels (one per half, 4/3 the work for a lane
    // thrown away). A layout is taken when it leaves at most the row's edge to the per-byte path
    // (~10x slower per byte).
    const int64_t n = int64_t(out_w) * CO;
    int64_t unfit = 0;
    const int shift = int16_weight_shift(kn);
    Avx2HPlan best = plan_layout(kn, in_w, out_w, C, CO, false, true, shift, unfit);
    if (unfit <= 64) return best;
    double best_cost = double(n - unfit) + 10.0 * unfit;
    for (const bool pixels : {false, true}) {
        if (pixels && CO == 4) break;  // the same slots as packed
        Avx2HPlan p = plan_layout(kn, in_w, out_w, C, CO, pixels, false, shift, unfit);
        const double cost = (pixels ? 4.0 / 3.0 : 1.1) * double(n - unfit) + 10.0 * unfit;
        if (cost < best_cost) {
            best = std::move(p);
            best_cost = cost;
        }
        if (unfit <= 64) break;
    }
    return best;
}

}  // namespace

std::unique_ptr<HorizontalPlan> horizontal_plan_avx2(const AxisWeights& kn, int in_w, int out_w, int C, int CO) {
    if (C < 3) return nullptr;
    return std::make_unique<Avx2HPlan>(best_layout(kn, in_w, out_w, C, CO));
}

}  // namespace smg

#endif
