#include "resample/tuning.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "resample/row_loops.hpp"
#include "tune.hpp"

namespace smg {

namespace {

constexpr int kVerticalJobBytes = 6144;          // bytes per row of the vertical job (2048 RGB pixels)
constexpr int kVerticalJobRows = 32;             // output rows of the vertical job, at most
constexpr int kVerticalJobSpan = 64;             // source rows the vertical job's windows span, at most
constexpr int64_t kVerticalJobSource = 1 << 21;  // source bytes of the vertical job, at most
constexpr int kVerticalJobMinBytes = 256;        // the narrowest vertical job row worth timing
constexpr int64_t kHorizontalJobBytes = 131072;  // source (or output) bytes of the horizontal job, about
constexpr int64_t kHorizontalJobRow = 1 << 19;   // the longest row (source or output) worth timing
constexpr int kSlack = 64;                       // bytes past each job row (kernels may read past a row)

// Random bytes (a fixed sequence: the job is the same in every process).
std::vector<uint8_t> noise(size_t n) {
    std::vector<uint8_t> v(n);
    uint32_t s = 0x9e3779b9u;
    for (uint8_t& p : v) {
        s = s * 1664525u + 1013904223u;
        p = uint8_t(s >> 24);
    }
    return v;
}

std::string weight_form(int shift) { return shift >= 0 ? "int16" : "int32"; }

// The class's window length: taps rounded up to a power of two ("taps<=8"), so that the kernels'
// relative speeds, which change slowly with the window, are timed a few times per process rather
// than once for every scale.
std::string taps_class(int taps) {
    int bound = 1;
    while (bound < taps) bound *= 2;
    return "taps<=" + std::to_string(bound);
}

// The rows of table t a class may choose from: the allowed ones, less the portable one where a
// SIMD row is allowed (it is there to take what no SIMD row takes, never the fastest).
template <class Fn, size_t N>
std::vector<const KernelRow<Fn>*> candidates(const KernelRow<Fn> (&t)[N]) {
    std::vector<const KernelRow<Fn>*> rows;
    for (const KernelRow<Fn>& r : t)
        if (r.allowed() && (r.arch != Arch::Any || rows.empty())) rows.push_back(&r);
    return rows;
}

}  // namespace

const KernelRow<VerticalRowFn>& choose_vertical(const AxisWeights& kv) {
    const KernelRow<VerticalRowFn>& fixed = first_allowed(kVerticalKernels);
    if (!tuning_enabled() || kv.pil_min.empty()) return fixed;
    const int shift = row_int16_shift(&kv.weights[0], kv.taps);
    std::vector<const KernelRow<VerticalRowFn>*> rows = candidates(kVerticalKernels);
    if (shift >= 0 || kv.taps > kVerticalMaddMaxTaps)  // where avx2-madd is avx2's code
        rows.erase(
            std::remove_if(rows.begin(), rows.end(),
                           [](const KernelRow<VerticalRowFn>* r) { return std::string(r->name) == "avx2-madd"; }),
            rows.end());
    if (rows.size() < 2) return fixed;
    const std::string key = weight_form(shift) + " " + taps_class(kv.taps);
    std::vector<std::string> names;
    for (const auto* r : rows) names.emplace_back(r->name);
    // The job: kv's first output rows (up to kVerticalJobRows, their windows within
    // kVerticalJobSpan source rows or one window) over random rows kVerticalJobBytes long, in cache
    // as the resizer's band of horizontal-pass rows is; rows narrower where the first window is so
    // long that the source would pass kVerticalJobSource, and no timing (the fixed order) where
    // even kVerticalJobMinBytes would. Made only if the class is timed.
    int n = 1, span = kv.pil_min[0] + kv.pil_len[0];
    while (n < kVerticalJobRows && n < int(kv.pil_min.size()) && kv.pil_min[n] + kv.pil_len[n] <= kVerticalJobSpan) {
        span = std::max(span, kv.pil_min[n] + kv.pil_len[n]);
        ++n;
    }
    const int64_t width = std::min<int64_t>(kVerticalJobBytes, kVerticalJobSource / span / 64 * 64 - kSlack);
    if (width < kVerticalJobMinBytes) return fixed;
    const int64_t stride = width + kSlack;
    std::vector<uint8_t> src, out;
    const auto reset = [&] {
        if (src.empty()) {
            src = noise(size_t(stride) * size_t(span));
            out.resize(size_t(width));
        }
    };
    const auto run = [&](size_t i) {
        for (int y = 0; y < n; ++y) {
            const int32_t* k = &kv.weights[size_t(y) * kv.taps] + (kv.pil_min[y] - kv.start[y]);
            rows[i]->fn(src.data() + int64_t(kv.pil_min[y]) * stride, stride, k, kv.pil_len[y], out.data(), int(width));
        }
    };
    return *rows[tune_once(Stage::ResampleVertical, key, names, reset, run)];
}

HPlan choose_hplan(const AxisWeights& kh, int in_w, int out_w, int C, int CO) {
    if (!tuning_enabled()) return make_hplan(kh, in_w, out_w, C, CO);
    const std::string key = "C" + std::to_string(C) + ">" + std::to_string(CO) + " " +
                            weight_form(int16_weight_shift(kh)) + " " + taps_class(kh.taps);
    const std::string chosen = tune_lookup(Stage::ResampleHorizontal, key);
    if (!chosen.empty()) {
        for (const KernelRow<HorizontalKernel>& r : kHorizontalKernels) {
            if (!r.allowed() || chosen != r.name) continue;
            if (std::unique_ptr<HorizontalPlan> plan = r.fn.plan(kh, in_w, out_w, C, CO)) return {&r, std::move(plan)};
        }
        return make_hplan(kh, in_w, out_w, C, CO);  // the choice does not take this resize
    }
    // Rows too long to time in a few milliseconds take the fixed order (and record no choice).
    const int64_t row_bytes = int64_t(in_w) * C, out_row_bytes = int64_t(out_w) * CO;
    if (std::max(row_bytes, out_row_bytes) > kHorizontalJobRow) return make_hplan(kh, in_w, out_w, C, CO);
    // Every candidate row that takes this resize, in the table's order.
    std::vector<HPlan> plans;
    for (const KernelRow<HorizontalKernel>* r : candidates(kHorizontalKernels))
        if (std::unique_ptr<HorizontalPlan> plan = r->fn.plan(kh, in_w, out_w, C, CO))
            plans.push_back({r, std::move(plan)});
    if (plans.size() < 2) return plans.empty() ? make_hplan(kh, in_w, out_w, C, CO) : std::move(plans[0]);
    std::vector<std::string> names;
    for (const HPlan& p : plans) names.emplace_back(p.kernel->name);
    // The job: about kHorizontalJobBytes of random source rows, or of output rows where those are
    // longer (2 to 64 rows of in_w pixels), through each row's plan for this resize.
    const int h = int(std::clamp<int64_t>(kHorizontalJobBytes / std::max(row_bytes, out_row_bytes), 2, 64));
    const int64_t stride = row_bytes + kSlack;
    std::vector<uint8_t> src, out;
    const auto reset = [&] {
        if (src.empty()) {
            src = noise(size_t(stride) * size_t(h));
            out.resize(size_t(out_w) * size_t(CO) * size_t(h));
        }
    };
    const auto run = [&](size_t i) {
        const ImageView view{src.data(), in_w, h, C, stride};
        plans[i].kernel->fn.rows(*plans[i].plan, kh, view, 0, 0, h, out.data(), int64_t(out_w) * CO, out_w, CO);
    };
    return std::move(plans[tune_once(Stage::ResampleHorizontal, key, names, reset, run)]);
}

}  // namespace smg
