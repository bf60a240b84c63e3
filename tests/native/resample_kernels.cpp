// The resampler's SIMD row kernels against the portable ones, byte for byte: vertical rows of
// every length 1..67 (and past the portable loop's 512-byte chunk), horizontal rows of every width
// 1..67 up and down, 1..4 channels and RGBX to RGB, through Pillow's and torch's weights of every
// filter and through made-up windows of up to 200 taps whose weights sit at the extremes (split
// edges, negative, the largest whose sums stay in int32, and weights too large to split, which a
// kernel must hand back or compute exactly).
#include <algorithm>
#include <iterator>
#include <string>

#include "check.hpp"
#include "resample/fixed.hpp"
#include "resample/torch_weights.hpp"
#include "resample/weights.hpp"

namespace smg::native_test {

namespace {

constexpr Filter kFilters[] = {Filter::Lanczos, Filter::Bilinear, Filter::Bicubic, Filter::Box, Filter::Hamming};

// The largest |weight| for which taps weights times 255 plus 2^21 stay inside int32 (Pillow's
// sums never come close; the portable kernel's int32 arithmetic is then defined).
int32_t weight_bound(int taps) { return int32_t((int64_t(1) << 31) - (int64_t(1) << 22) - 1) / (255 * taps); }

// A weight from the edges of the split (lo 0 or 2047, hi -1), Pillow's 1.0 and 0.5, the bound,
// or uniform inside it.
int32_t extreme_weight(Rng& r, int taps) {
    const int32_t b = weight_bound(taps);
    const int32_t edges[] = {0,       1,       -1,         2047, 2048, -2047, -2048,    -2049,     4095,
                             1 << 21, 1 << 22, -(1 << 21), b,    -b,   b - 1, -(b - 1), b & ~2047, -(b & ~2047)};
    const int32_t w = r.range(0, 3) ? edges[r.range(0, std::size(edges) - 1)] : int32_t(r.range(-b, b));
    return std::max(-b, std::min(b, w));
}

void fill(Rng& r, uint8_t* p, size_t n, int mode) {
    for (size_t i = 0; i < n; ++i) p[i] = mode == 0 ? r.byte() : mode == 1 ? 0 : mode == 2 ? 255 : (r.byte() & 0x81);
}

// One vertical case: taps source rows of len bytes at stride, the last ending at a guard page.
void vertical_case(Rng& r, const std::vector<const KernelRow<VerticalRowFn>*>& rows, const int32_t* k, int taps,
                   int len, int pixel_mode, uint8_t max_pixel) {
    const int64_t stride = len + (r.range(0, 1) ? r.range(0, 40) : 0);
    Guarded src{size_t((taps - 1) * stride + len)};
    fill(r, src.data(), src.size(), pixel_mode);
    if (max_pixel < 255)
        for (size_t i = 0; i < src.size(); ++i) src.data()[i] = uint8_t(src.data()[i] % (max_pixel + 1));
    Guarded want{size_t(len)}, got{size_t(len)};
    vertical_row_scalar(src.data(), stride, k, taps, want.data(), len);
    for (const auto* row : rows) {
        std::memset(got.data(), 0xA5, size_t(len));
        row->fn(src.data(), stride, k, taps, got.data(), len);
        tally("resample.vertical", row->name)
            .check(std::memcmp(want.data(), got.data(), size_t(len)) == 0,
                   "taps " + std::to_string(taps) + " len " + std::to_string(len) + " k0 " + std::to_string(k[0]));
    }
}

// One horizontal case: h rows of in_w pixels of C channels into out_w pixels of CO, rows [y0, y1).
void horizontal_case(Rng& r, const std::vector<const KernelRow<HorizontalKernel>*>& rows, const AxisWeights& kn,
                     int in_w, int out_w, int C, int CO, const std::string& what) {
    const int h = int(r.range(1, 4));
    const int64_t stride = int64_t(in_w) * C + (r.range(0, 1) ? r.range(0, 9) : 0);
    Guarded src{size_t((h - 1) * stride + int64_t(in_w) * C)};  // the last row ends at the guard page
    fill(r, src.data(), src.size(), int(r.range(0, 3)));
    const ImageView view{src.data(), in_w, h, C, stride};
    const int64_t y0 = r.range(0, h - 1), y1 = r.range(y0 + 1, h);
    const int64_t out_stride = int64_t(out_w) * CO + r.range(0, 5);
    const size_t out_bytes = size_t((y1 - y0 - 1) * out_stride + int64_t(out_w) * CO);
    Guarded want(out_bytes), got(out_bytes);
    std::memset(want.data(), 0x5A, out_bytes);
    horizontal_rows_scalar(HorizontalPlan{}, kn, view, 0, y0, y1, want.data(), out_stride, out_w, CO);
    for (const auto* row : rows) {
        Tally& t = tally("resample.horizontal", row->name);
        const auto plan = row->fn.plan(kn, in_w, out_w, C, CO);
        if (!plan) {  // handed back: the next row of the table takes this resize
            ++t.skipped;
            continue;
        }
        std::memset(got.data(), 0x5A, out_bytes);
        row->fn.rows(*plan, kn, view, 0, y0, y1, got.data(), out_stride, out_w, CO);
        t.check(std::memcmp(want.data(), got.data(), out_bytes) == 0,
                what + " " + std::to_string(in_w) + "->" + std::to_string(out_w) + " C" + std::to_string(C) + "->" +
                    std::to_string(CO));
    }
}

// Weights whose split's high half is past int16: 2^27 (int16 times 2^21, which a kernel may take
// as one 16-bit weight) and 2^27 + 1 (no such form: a kernel must compute it exactly or hand it back).
constexpr int32_t kTooLarge[] = {int32_t(1) << 27, (int32_t(1) << 27) + 1};

// Windows of taps weights from the extremes at random starts inside in_w.
AxisWeights extreme_weights(Rng& r, int in_w, int out_w, int taps, int32_t scale) {
    AxisWeights kn;
    kn.taps = taps;
    for (int x = 0; x < out_w; ++x) {
        kn.start.push_back(int(r.range(0, in_w - taps)));
        for (int j = 0; j < taps; ++j) kn.weights.push_back(scale ? scale : extreme_weight(r, taps));
    }
    return kn;
}

}  // namespace

void test_vertical(uint64_t seed) {
    Rng r(seed);
    const auto rows = simd_rows(kVerticalKernels);
    for (const auto* row : rows) tally("resample.vertical", row->name);
    std::vector<int> lens;
    for (int len = 1; len <= 67; ++len) lens.push_back(len);
    for (int len : {127, 128, 129, 511, 512, 513, 1031}) lens.push_back(len);
    // Pillow's and torch's windows: every output row of a few up and down scales.
    for (int in : {1, 2, 3, 7, 16, 33, 67}) {
        for (int out : {1, 2, 5, 16, 31, 67, 130}) {
            for (Filter f : kFilters) {
                std::vector<AxisWeights> kns{make_weights(in, out, f)};
                if (torch_implements(f)) kns.push_back(make_torch_weights(in, out, f));
                for (const AxisWeights& kn : kns)
                    for (int i = 0; i < out; i += std::max(1, out / 7)) {
                        const int len = lens[size_t(r.range(0, int64_t(lens.size()) - 1))];
                        vertical_case(r, rows, &kn.weights[size_t(i) * kn.taps], kn.taps, len, int(r.range(0, 3)), 255);
                    }
            }
        }
    }
    // Weights at the extremes, every length.
    for (int len : lens) {
        for (int rep = 0; rep < 6; ++rep) {
            // Up to 8 taps, up to 40, and past the SIMD kernels' 128 (which hand the row back).
            const int taps = int(rep < 4 ? r.range(1, 8) : rep == 4 ? r.range(9, 40) : r.range(120, 200));
            std::vector<int32_t> k(static_cast<size_t>(taps));
            for (int32_t& w : k) w = extreme_weight(r, taps);
            vertical_case(r, rows, k.data(), taps, len, rep % 4, 255);
        }
        // Weights too large for the split (hi past int16), an int16 value times 2^21 and one
        // that is not: pixels kept small so that the portable int32 sum is defined.
        for (const int32_t w : kTooLarge) vertical_case(r, rows, &w, 1, len, 0, 15);
    }
}

void test_horizontal(uint64_t seed) {
    Rng r(seed);
    const auto rows = simd_rows(kHorizontalKernels);
    for (const auto* row : rows) tally("resample.horizontal", row->name);
    const int forms[][2] = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {4, 3}};
    for (int in_w = 1; in_w <= 67; ++in_w) {
        for (int rep = 0; rep < 4; ++rep) {
            const int out_w = rep == 0 ? in_w : int(r.range(1, rep == 1 ? in_w : 67));  // same, down, any
            const Filter f = kFilters[r.range(0, 4)];
            for (const auto& form : forms) {
                horizontal_case(r, rows, make_weights(in_w, out_w, f), in_w, out_w, form[0], form[1], "pillow");
                if (torch_implements(f))
                    horizontal_case(r, rows, make_torch_weights(in_w, out_w, f), in_w, out_w, form[0], form[1],
                                    "torch");
                const int taps = int(r.range(1, std::min(in_w, 12)));
                horizontal_case(r, rows, extreme_weights(r, in_w, out_w, taps, 0), in_w, out_w, form[0], form[1],
                                "extreme");
            }
        }
        // Wide rows downscaled 2-20x (the AVX-512 rows read channel planes past ~4x).
        if (in_w <= 24) {
            const int wide = int(r.range(200, 2100));
            const int down = int(r.range(std::max(1, wide / 20), std::max(1, wide / 2)));
            const Filter f = kFilters[r.range(0, 4)];
            for (const auto& form : forms) {
                horizontal_case(r, rows, make_weights(wide, down, f), wide, down, form[0], form[1], "pillow wide");
                if (torch_implements(f))
                    horizontal_case(r, rows, make_torch_weights(wide, down, f), wide, down, form[0], form[1],
                                    "torch wide");
            }
        }
        // Wider rows with one window in about 600 moved anywhere in the row: groups that fit no
        // window (per pixel) among those that do.
        if (in_w <= 24) {
            const int wide = int(r.range(4000, 8000));
            const int down = int(r.range(wide / 8, wide / 2));
            AxisWeights moved = make_weights(wide, down, kFilters[r.range(0, 4)]);
            for (int i = 0; i < std::max(1, down / 600); ++i)
                moved.start[size_t(r.range(0, down - 1))] = int(r.range(0, wide - moved.taps));
            for (const auto& form : forms) horizontal_case(r, rows, moved, wide, down, form[0], form[1], "moved wide");
        }
        // Weights too large for the split, on small pixels (as in the vertical case).
        for (const int32_t w : kTooLarge) {
            AxisWeights big = extreme_weights(r, in_w, int(r.range(1, 67)), 1, w);
            for (const auto& form : forms) {
                const int out_w = int(big.start.size());
                const int C = form[0];
                Rng pr(seed + uint64_t(in_w));
                const int h = 2;
                Guarded src{size_t(h * in_w * C)};
                for (size_t i = 0; i < src.size(); ++i) src.data()[i] = pr.byte() & 15;
                const ImageView view{src.data(), in_w, h, C, int64_t(in_w) * C};
                Guarded want{size_t(h * out_w * form[1])}, got{size_t(h * out_w * form[1])};
                horizontal_rows_scalar(HorizontalPlan{}, big, view, 0, 0, h, want.data(), out_w * form[1], out_w,
                                       form[1]);
                for (const auto* row : rows) {
                    Tally& t = tally("resample.horizontal", row->name);
                    const auto plan = row->fn.plan(big, in_w, out_w, C, form[1]);
                    if (!plan) {
                        ++t.skipped;
                        continue;
                    }
                    row->fn.rows(*plan, big, view, 0, 0, h, got.data(), out_w * form[1], out_w, form[1]);
                    t.check(std::memcmp(want.data(), got.data(), got.size()) == 0,
                            "unsplittable weights " + std::to_string(w) + " " + std::to_string(in_w) + "->" +
                                std::to_string(out_w) + " C" + std::to_string(C) + "->" + std::to_string(form[1]));
                }
            }
        }
    }
}

}  // namespace smg::native_test
