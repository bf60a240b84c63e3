// The SIMD normalize + patchify kernels against the table kernel, byte for byte, in float32,
// bfloat16 and float16: channel-first patches of sides 1..33 and whole images, merge 1 and 2,
// one and two temporal copies, bands narrower and shorter than the grid (the zero padding), RGB
// and RGBX with row slack; channel-last patches where the kernel has that form; a third of the
// calls under a caller's upward rounding mode. Normalizations:
// the processors' constants (CLIP, ImageNet, SigLIP's 0.5) under every recipe and random ones; a
// kernel runs only those its prepare() accepted, and must accept the standard ones in every dtype.
#include <algorithm>
#include <cfenv>
#include <string>

#include "check.hpp"
#include "fp_env.hpp"
#include "normalize/lut.hpp"
#include "patchify/channels_last.hpp"
#include "patchify/kernels.hpp"

namespace smg::native_test {

namespace {

constexpr DType kDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16};

std::vector<NormParams> norms(Rng& r) {
    const double clip_m[3] = {0.48145466, 0.4578275, 0.40821073}, clip_s[3] = {0.26862954, 0.26130258, 0.27577711};
    const double inet_m[3] = {0.485, 0.456, 0.406}, inet_s[3] = {0.229, 0.224, 0.225};
    std::vector<NormParams> out;
    for (LutRecipe rec : {LutRecipe::HfRescaleNormalize, LutRecipe::KimiDivideMultiply, LutRecipe::TorchFusedNormalize,
                          LutRecipe::TorchRescale}) {
        out.push_back({rec, 1.0 / 255.0, {clip_m[0], clip_m[1], clip_m[2]}, {clip_s[0], clip_s[1], clip_s[2]}});
        out.push_back({rec, 1.0 / 255.0, {inet_m[0], inet_m[1], inet_m[2]}, {inet_s[0], inet_s[1], inet_s[2]}});
        out.push_back({rec, 1.0 / 255.0, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}});
    }
    for (int i = 0; i < 6; ++i) {
        NormParams p{i % 2 ? LutRecipe::KimiDivideMultiply : LutRecipe::HfRescaleNormalize,
                     1.0 / double(r.range(1, 300)),
                     {},
                     {}};
        for (int c = 0; c < 3; ++c) {
            p.mean[c] = double(r.range(-1000, 1000)) / 997.0;
            p.std_[c] = double(r.range(1, 1000)) / 991.0;
        }
        out.push_back(p);
    }
    return out;
}

// Every standard normalization (the first 12), in every dtype, must be taken by each SIMD kernel.
constexpr int kStandard = 12;

struct Prepared {
    const KernelRow<PatchifyKernel>* row;
    PatchifyPrep prep;
};

void layout_case(Rng& r, const std::vector<Prepared>& kernels, DType dt, const void* lut, const PatchLayout& L,
                 bool channels_last) {
    const int P = L.patch, m = L.merge;
    const int C = int(r.range(3, 4));
    const int width = int(r.range(1, L.grid_w * P)), height = int(r.range(1, m * P));
    const int64_t stride = int64_t(width) * C + (r.range(0, 1) ? r.range(0, 7) : 0);
    Guarded img{size_t((height - 1) * stride + int64_t(width) * C)};
    for (size_t i = 0; i < img.size(); ++i) img.data()[i] = r.byte();
    const ImageView band{img.data(), width, height, C, stride};
    const int bh = int(r.range(0, 1));  // the second block row: the rows before it untouched
    const size_t es = size_t(dtype_size(dt));
    const size_t bytes = size_t(2 * L.grid_w * m * patch_row_elems(L)) * es;
    Guarded want(bytes), got(bytes);
    std::memset(want.data(), 0xA5, bytes);
    PatchifyPrep table_prep;
    if (channels_last) {
        block_row_channels_last(band, L, dt, lut, want.data(), bh);
    } else {
        patchify_table(band, L, table_prep, dt, lut, want.data(), bh);
    }
    for (const Prepared& k : kernels) {
        if (P < k.row->fn.min_patch || P > k.row->fn.max_patch || (channels_last && !k.row->fn.channels_last)) continue;
        std::memset(got.data(), 0xA5, bytes);
        auto fn = channels_last ? k.row->fn.channels_last : k.row->fn.block_row;
        // A caller's rounding mode must not reach the values: the kernel computes under the
        // default environment (fp_env.hpp).
        const bool upward = r.range(0, 2) == 0;
        if (upward) std::fesetround(FE_UPWARD);
        fn(band, L, k.prep, dt, lut, got.data(), bh);
        if (upward) std::fesetround(FE_TONEAREST);
        tally(channels_last ? "patchify.channels_last" : "patchify", k.row->name)
            .check(std::memcmp(want.data(), got.data(), bytes) == 0,
                   std::string(k.prep.label) + " dtype " + std::to_string(int(dt)) + " P " + std::to_string(P) + " m " +
                       std::to_string(m) + " T " + std::to_string(L.temporal) + " " + std::to_string(width) + "x" +
                       std::to_string(height) + " C" + std::to_string(C));
    }
}

}  // namespace

void test_patchify(uint64_t seed) {
    Rng r(seed);
    const auto rows = simd_rows(kPatchifyKernels);
    for (const auto* row : rows) {
        tally("patchify", row->name);
        if (row->fn.channels_last) tally("patchify.channels_last", row->name);
    }
    std::vector<PatchLayout> layouts;
    for (int P = 1; P <= 33; ++P)
        for (int m = 1; m <= 2; ++m)
            for (int T = 1; T <= 2; ++T) layouts.push_back({P, m, T, m, m * int(r.range(1, 3))});
    for (int P : {48, 67, 100, 130}) layouts.push_back({P, 1, 1, 1, 1});  // whole images
    const std::vector<NormParams> ns = norms(r);
    for (size_t ni = 0; ni < ns.size(); ++ni) {
        for (DType dt : kDtypes) {
            alignas(64) unsigned char lut[3 * 256 * 4];
            std::vector<Prepared> kernels;
            {
                const DefaultFpEnv env;  // as the Normalizer builds and checks
                build_lut(ns[ni], dt, lut);
                for (const auto* row : rows) {
                    Prepared p{row, {}};
                    if (row->fn.prepare(ns[ni], dt, lut, p.prep)) {
                        kernels.push_back(p);
                    } else {
                        ++tally("patchify", row->name).skipped;
                        if (int(ni) < kStandard)
                            tally("patchify", row->name)
                                .check(false, "refused standard normalization " + std::to_string(ni) + " (recipe " +
                                                  std::to_string(int(ns[ni].recipe)) + ")");
                    }
                }
            }
            if (kernels.empty()) continue;
            for (const PatchLayout& L : layouts) {
                // Every layout for the first normalization of each dtype, a sample for the others.
                if (ni > 0 && r.range(0, 5) != 0) continue;
                layout_case(r, kernels, dt, lut, L, false);
                if (L.merge == 1 && L.temporal == 1) layout_case(r, kernels, dt, lut, L, true);
            }
        }
    }
}

}  // namespace smg::native_test
