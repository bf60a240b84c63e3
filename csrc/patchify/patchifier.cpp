#include "patchify/patchifier.hpp"

#include <algorithm>
#include <cstring>

#include "cpu.hpp"
#include "fp_env.hpp"
#include "kernel_log.hpp"
#include "patchify/copy.hpp"
#include "patchify/simd.hpp"

namespace smg {

namespace {

// ---- portable path: table lookups ----

template <typename T>
void block_row_scalar(const ImageView& band, const PatchLayout& L, const T* lut, T* dst, int bh) {
    const int P = L.patch, m = L.merge, Tn = L.temporal;
    const int64_t row_elems = patch_row_elems(L), pp = int64_t(P) * P;
    const int blocks_w = L.grid_w / m;
    for (int bw = 0; bw < blocks_w; ++bw) {
        for (int mh = 0; mh < m; ++mh) {
            for (int mw = 0; mw < m; ++mw) {
                const int64_t r = ((int64_t(bh) * blocks_w + bw) * m + mh) * m + mw;
                T* out = dst + r * row_elems;
                const int x0 = (bw * m + mw) * P;
                const int valid_x = std::max(0, std::min(P, band.width - x0));
                for (int c = 0; c < 3; ++c) {
                    const T* lc = lut + c * 256;
                    for (int py = 0; py < P; ++py) {
                        const int y = mh * P + py;  // row inside the band
                        const int vx = y < band.height ? valid_x : 0;
                        const int C = band.channels;  // 3 (RGB) or 4 (RGBX): the pixel stride
                        const uint8_t* src =
                            band.data + int64_t(std::min(y, band.height - 1)) * band.stride + int64_t(x0) * C + c;
                        T* o = out + int64_t(c) * Tn * pp + int64_t(py) * P;
                        for (int px = 0; px < vx; ++px) o[px] = lc[src[px * C]];
                        for (int px = vx; px < P; ++px) o[px] = lc[0];
                        for (int t = 1; t < Tn; ++t) std::memcpy(o + t * pp, o, sizeof(T) * P);
                    }
                }
            }
        }
    }
}

#if SMG_X86
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
#endif

}  // namespace

const char* Normalizer::kernel_name(Kernel k) {
    switch (k) {
        case Kernel::SimdFast: return "avx512-fast";
        case Kernel::Simd: return "avx512";
        case Kernel::Avx2Fast: return "avx2-fast";
        case Kernel::Avx2Gather: return "avx2-gather";
        case Kernel::Copy: return "copy";
        default: return "table";
    }
}

Normalizer::Normalizer(const NormParams& params, DType dtype) : params_(params), dtype_(dtype) {
    const DefaultFpEnv fp_env;  // the table and the kernel checks below are defined under it
    build_lut(params_, dtype_, lut_);
    if (dtype_ == DType::UInt8) return;  // nothing to normalize: kernel_for() says Copy
#if SMG_X86
    if (cpu_has_avx512vbmi()) {
        if (avx512_matches_lut(simd_norm(params_, true), dtype_, lut_)) {
            avx512_ = Kernel::SimdFast;
        } else if (avx512_matches_lut(simd_norm(params_, false), dtype_, lut_)) {
            avx512_ = Kernel::Simd;
        }
        if (avx512_ != Kernel::Table) simd_ = simd_norm(params_, avx512_ == Kernel::SimdFast);
    }
    if (cpu_has_patchify_avx2()) {
        // Fastest first; the gather reads the table itself, so it matches whatever the constants.
        const SimdNorm fast = simd_norm(params_, true), exact = simd_norm(params_, false);
        if (avx2_matches_lut(fast, Avx2Form::Fast, dtype_, lut_)) {
            avx2_ = Kernel::Avx2Fast, form2_ = Avx2Form::Fast, simd2_ = fast;
        } else if (avx2_matches_lut(exact, Avx2Form::Gather, dtype_, lut_)) {
            avx2_ = Kernel::Avx2Gather, form2_ = Avx2Form::Gather, simd2_ = exact;
        }
    }
#endif
}

Normalizer::Kernel Normalizer::kernel_for(int patch) const {
    if (dtype_ == DType::UInt8) return Kernel::Copy;
    if (avx512_ != Kernel::Table && patch <= 16) return avx512_;
    // The AVX2 kernel's whole-vector stores spill up to one vector (8 or 16 elements) past a
    // pixel row; that spill stays inside the patch row only when a patch holds at least 16
    // values of a channel. Smaller patches (1-3: no model uses them) take the table.
    return patch >= 4 ? avx2_ : Kernel::Table;
}

Patchifier::Patchifier(const PatchLayout& L, const Normalizer& norm)
    : L_(L), norm_(&norm), kernel_(norm.kernel_for(L.patch)) {}

void Patchifier::block_row(const ImageView& band, int bh, void* dst) const {
    const DType dt = norm_->dtype();
    switch (kernel_) {
#if SMG_X86
        case Normalizer::Kernel::Simd:
        case Normalizer::Kernel::SimdFast:
            note_ran(KernelId::PatchifyAvx512Vbmi);
            avx512_block_row(band, L_, norm_->simd(), dt, dst, bh);
            return;
        case Normalizer::Kernel::Avx2Gather:
        case Normalizer::Kernel::Avx2Fast:
            note_ran(KernelId::PatchifyAvx2);
            avx2_block_row(band, L_, norm_->simd_avx2(), norm_->avx2_form(), dt, norm_->lut(), dst, bh);
            return;
#endif
        default: break;
    }
    if (kernel_ == Normalizer::Kernel::Copy) {  // uint8: the table is the identity
        block_row_u8(band, L_, static_cast<uint8_t*>(dst), bh);
        return;
    }
    note_ran(KernelId::PatchifyTable);
    if (dt == DType::Float32) {
        block_row_scalar<float>(band, L_, static_cast<const float*>(norm_->lut()), static_cast<float*>(dst), bh);
    } else {
        block_row_scalar<uint16_t>(band, L_, static_cast<const uint16_t*>(norm_->lut()), static_cast<uint16_t*>(dst),
                                   bh);
    }
}

}  // namespace smg
