// AVX-512 VBMI normalize + patchify for P <= 16: a masked load fetches one patch row's
// interleaved bytes, vpermb spreads one channel into int32 lanes, the values are computed in
// registers and written with masked stores.
#include "patchify/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "fp_env.hpp"

namespace smg {

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 header false positive
#pragma GCC diagnostic ignored "-Wuninitialized"
#define SMG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,fma")))

// float32 values -> the output dtype's bits in int32 lanes.
#define SMG_INLINE __attribute__((always_inline)) inline
SMG_AVX512 SMG_INLINE __m512i finish16(__m512 f, DType dt) {
    const __m512i bits = _mm512_castps_si512(f);
    switch (dt) {
        case DType::Float32: return bits;
        case DType::BFloat16: {  // round to nearest even on the upper 16 bits (values are finite)
            const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
            const __m512i r = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lsb);
            return _mm512_srli_epi32(r, 16);
        }
        default: return _mm512_cvtepu16_epi32(_mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

// One channel's normalization constants in every lane, or each lane's own channel's (channel-last
// patches interleave the channels within a vector).
struct LaneNorm {
    __m512 mean, std_, inv;
    __m512d mean_d_lo, mean_d_hi, inv_d_lo, inv_d_hi;  // Kimi's double-precision form, by lane half
};

SMG_AVX512 SMG_INLINE LaneNorm channel_norm(const SimdNorm& n, int c) {
    return {_mm512_set1_ps(n.mean[c]),   _mm512_set1_ps(n.std_[c]),   _mm512_set1_ps(n.inv[c]),
            _mm512_set1_pd(n.mean_d[c]), _mm512_set1_pd(n.mean_d[c]), _mm512_set1_pd(n.inv_d[c]),
            _mm512_set1_pd(n.inv_d[c])};
}

// Lane i normalized as channel ch[i].
SMG_AVX512 LaneNorm lane_norm(const SimdNorm& n, const uint8_t (&ch)[16]) {
    alignas(64) float mean[16], std_[16], inv[16];
    alignas(64) double mean_d[16], inv_d[16];
    for (int i = 0; i < 16; ++i) {
        mean[i] = n.mean[ch[i]];
        std_[i] = n.std_[ch[i]];
        inv[i] = n.inv[ch[i]];
        mean_d[i] = n.mean_d[ch[i]];
        inv_d[i] = n.inv_d[ch[i]];
    }
    return {_mm512_load_ps(mean),       _mm512_load_ps(std_),  _mm512_load_ps(inv),      _mm512_load_pd(mean_d),
            _mm512_load_pd(mean_d + 8), _mm512_load_pd(inv_d), _mm512_load_pd(inv_d + 8)};
}

// The reference's arithmetic on 16 int32 lanes holding pixel values, same IEEE operations in the
// same order as build_lut (so identical results), then the output dtype's rounding. `fast` and
// `recipe` are passed apart from n so that a kernel compiled for one mode folds them away; ln
// holds each lane's channel constants.
SMG_AVX512 SMG_INLINE __m512i normalize16(__m512i u, const SimdNorm& n, const LaneNorm& ln, DType dt, bool fast,
                                          int recipe) {
    __m512 f;
    if (fast) {
        // Single precision throughout: u * k with k = k_hi + k_lo as one FMA, u * k_hi exact
        // inside it plus the (tiny, rounded) u * k_lo, then division as x * (1/s) corrected by
        // one FMA residual. Not provably the reference's rounding for every input, which is why
        // Normalizer checks all 768 table values first and otherwise uses the double-precision
        // form.
        const __m512 uf = _mm512_cvtepi32_ps(u);
        f = _mm512_fmadd_ps(uf, _mm512_set1_ps(n.k_hi), _mm512_mul_ps(uf, _mm512_set1_ps(n.k_lo)));
        f = _mm512_sub_ps(f, ln.mean);
        if (recipe == int(LutRecipe::HfRescaleNormalize)) {
            const __m512 q = _mm512_mul_ps(f, ln.inv);
            f = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, ln.std_, f), ln.inv, q);
        } else {
            f = _mm512_mul_ps(f, ln.inv);
        }
        return finish16(f, dt);
    }
    const __m512d lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(u));
    const __m512d hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(u, 1));
    __m256 fa, fb;
    if (recipe == int(LutRecipe::HfRescaleNormalize)) {
        fa = _mm512_cvtpd_ps(_mm512_mul_pd(lo, _mm512_set1_pd(n.rescale)));
        fb = _mm512_cvtpd_ps(_mm512_mul_pd(hi, _mm512_set1_pd(n.rescale)));
    } else {
        // Each step in double, each result rounded to float (build_lut's Kimi order).
        const __m512d k255 = _mm512_set1_pd(255.0);
        fa = _mm512_cvtpd_ps(_mm512_div_pd(lo, k255));
        fb = _mm512_cvtpd_ps(_mm512_div_pd(hi, k255));
        fa = _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(fa), ln.mean_d_lo));
        fb = _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(fb), ln.mean_d_hi));
        fa = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(fa), ln.inv_d_lo));
        fb = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(fb), ln.inv_d_hi));
    }
    f = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(fa)), _mm256_castps_pd(fb), 1));
    if (recipe == int(LutRecipe::HfRescaleNormalize)) {
        f = _mm512_div_ps(_mm512_sub_ps(f, ln.mean), ln.std_);
    }
    return finish16(f, dt);
}

// The same with every lane in channel c.
SMG_AVX512 SMG_INLINE __m512i normalize16(__m512i u, const SimdNorm& n, int c, DType dt, bool fast, int recipe) {
    return normalize16(u, n, channel_norm(n, c), dt, fast, recipe);
}

// All 768 table entries recomputed by normalize16 must equal the table.
SMG_AVX512 bool simd_matches_lut(const SimdNorm& n, DType dt, const void* lut) {
    for (int c = 0; c < 3; ++c) {
        for (int u0 = 0; u0 < 256; u0 += 16) {
            alignas(64) int32_t got[16];
            const __m512i u = _mm512_add_epi32(_mm512_set1_epi32(u0),
                                               _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
            _mm512_store_si512(got, normalize16(u, n, c, dt, n.fast, n.recipe));
            for (int i = 0; i < 16; ++i) {
                uint32_t want;
                if (dt == DType::Float32) {
                    std::memcpy(&want, static_cast<const float*>(lut) + c * 256 + u0 + i, 4);
                } else {
                    want = static_cast<const uint16_t*>(lut)[c * 256 + u0 + i];
                }
                if (uint32_t(got[i]) != want) return false;
            }
        }
    }
    return true;
}

// Compile-time kernel mode: bit 0 fast, bit 1 recipe, bits 2-3 dtype, plus kAnyMode (read from
// the run-time SimdNorm and DType instead).
constexpr int kAnyMode = -1;
constexpr int mode_of(bool fast, int recipe, DType dt) { return int(fast) | (recipe << 1) | (int(dt) << 2); }

// P <= 16: a masked load fetches one patch row's 3P interleaved bytes, vpermb spreads one channel
// into int32 lanes, normalize16 computes the values; per channel all P rows are kept in registers
// and then written as T sequential runs (front-to-back stores are what the write path likes).
// kP, kT: the patch size and temporal copies when known at compile time (0: read from L); with
// kMode fixed too, the loops unroll fully and v[] lives in registers.
// One patch row (all channels, T copies) from the P band rows at rows[0..P) (byte offset of the
// patch's first pixel already applied). Full: every row is inside the band and the patch inside
// its width, so no row needs a mask of its own.
template <typename T, int kP, int kT, int kMode, bool Full>
SMG_AVX512 SMG_INLINE void patch_avx512(const uint8_t* const* rows, const __mmask64* row_mask, __mmask64 seg_mask,
                                        const uint8_t (*ctrl_b)[64], int P, int Tn, const SimdNorm& n, DType dt,
                                        bool fast, int recipe, T* out) {
    constexpr __mmask64 kLow = 0x1111111111111111ULL;  // byte 0 of each int32 lane
    const int64_t pp = int64_t(P) * P;
    const __mmask16 lanes = __mmask16((1u << P) - 1);
    for (int c = 0; c < 3; ++c) {
        const __m512i ctrl = _mm512_load_si512(ctrl_b[c]);
        __m512i v[16];
#pragma GCC unroll 16
        for (int py = 0; py < P; ++py) {
            const __mmask64 k = Full ? seg_mask : (seg_mask & row_mask[py]);
            const __m512i seg = _mm512_maskz_loadu_epi8(k, rows[py]);
            v[py] = normalize16(_mm512_maskz_permutexvar_epi8(kLow, ctrl, seg), n, c, dt, fast, recipe);
        }
        T* o = out + int64_t(c) * Tn * pp;
#pragma GCC unroll 2
        for (int t = 0; t < Tn; ++t) {
#pragma GCC unroll 16
            for (int py = 0; py < P; ++py) {
                T* d = o + t * pp + int64_t(py) * P;
                if constexpr (sizeof(T) == 4) {
                    _mm512_mask_storeu_epi32(d, lanes, v[py]);
                } else {
                    _mm256_mask_storeu_epi16(d, lanes, _mm512_cvtepi32_epi16(v[py]));
                }
            }
        }
    }
}

// P <= 16: a masked load fetches one patch row's 3P interleaved bytes, vpermb spreads one channel
// into int32 lanes, normalize16 computes the values; per channel all P rows are kept in registers
// and then written as T sequential runs (front-to-back stores are what the write path likes).
// kP, kT: the patch size and temporal copies when known at compile time (0: read from L); with
// kMode fixed too, the loops unroll fully and v[] lives in registers.
template <typename T, int kP, int kT, int kMode>
SMG_AVX512 void block_row_avx512(const ImageView& band, const PatchLayout& L, const SimdNorm& n, DType dt_rt, T* dst,
                                 int bh) {
    const int P = kP ? kP : L.patch, m = L.merge, Tn = kT ? kT : L.temporal;
    const bool fast = kMode == kAnyMode ? n.fast : bool(kMode & 1);
    const int recipe = kMode == kAnyMode ? n.recipe : (kMode >> 1) & 1;
    const DType dt = kMode == kAnyMode ? dt_rt : DType(kMode >> 2);
    const int64_t row_elems = int64_t(3) * Tn * P * P;
    const int blocks_w = L.grid_w / m;
    const int C = band.channels;  // 3 (RGB) or 4 (RGBX): the pixel stride
    alignas(64) uint8_t ctrl_b[3][64] = {};
    for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 16; ++i) ctrl_b[c][4 * i] = uint8_t(C * i + c);
    const __mmask64 full_mask = C * P >= 64 ? ~0ULL : ((1ULL << (C * P)) - 1);
    for (int bw = 0; bw < blocks_w; ++bw) {
        for (int mh = 0; mh < m; ++mh) {
            // Band rows of this patch row; rows past the band's height read as zeros (mask 0).
            const int valid_y = std::max(0, std::min(P, band.height - mh * P));
            const uint8_t* first = band.data + int64_t(mh) * P * band.stride;
            for (int mw = 0; mw < m; ++mw) {
                const int64_t r = ((int64_t(bh) * blocks_w + bw) * m + mh) * m + mw;
                T* out = dst + r * row_elems;
                const int x0 = (bw * m + mw) * P;
                const int valid_x = std::max(0, std::min(P, band.width - x0));
                const uint8_t* rows[16];
                __mmask64 row_mask[16];
#pragma GCC unroll 16
                for (int py = 0; py < P; ++py) {
                    rows[py] = (py < valid_y ? first + int64_t(py) * band.stride : band.data) +
                               (valid_x > 0 ? int64_t(x0) * C : 0);
                    row_mask[py] = py < valid_y ? ~0ULL : 0;
                }
                if (valid_y == P && valid_x == P) {
                    patch_avx512<T, kP, kT, kMode, true>(rows, row_mask, full_mask, ctrl_b, P, Tn, n, dt, fast, recipe,
                                                         out);
                } else {
                    const __mmask64 seg_mask = C * valid_x >= 64 ? ~0ULL : ((1ULL << (C * valid_x)) - 1);
                    patch_avx512<T, kP, kT, kMode, false>(rows, row_mask, seg_mask, ctrl_b, P, Tn, n, dt, fast, recipe,
                                                          out);
                }
            }
        }
    }
}

using BlockRowFn = void (*)(const ImageView&, const PatchLayout&, const SimdNorm&, DType, void*, int);

template <typename T, int kP, int kT, int kMode>
void block_row_entry(const ImageView& band, const PatchLayout& L, const SimdNorm& n, DType dt, void* dst, int bh) {
    block_row_avx512<T, kP, kT, kMode>(band, L, n, dt, static_cast<T*>(dst), bh);
}

// Fast-mode kernels compiled for the shapes the model families use (P 14 or 16, T 1 or 2).
template <int kP, int kT>
BlockRowFn pick_shape(int mode) {
    switch (mode) {
        case mode_of(true, 0, DType::Float32): return block_row_entry<float, kP, kT, mode_of(true, 0, DType::Float32)>;
        case mode_of(true, 1, DType::Float32): return block_row_entry<float, kP, kT, mode_of(true, 1, DType::Float32)>;
        case mode_of(true, 0, DType::BFloat16):
            return block_row_entry<uint16_t, kP, kT, mode_of(true, 0, DType::BFloat16)>;
        case mode_of(true, 1, DType::BFloat16):
            return block_row_entry<uint16_t, kP, kT, mode_of(true, 1, DType::BFloat16)>;
        case mode_of(true, 0, DType::Float16):
            return block_row_entry<uint16_t, kP, kT, mode_of(true, 0, DType::Float16)>;
        case mode_of(true, 1, DType::Float16):
            return block_row_entry<uint16_t, kP, kT, mode_of(true, 1, DType::Float16)>;
        default: return nullptr;
    }
}

BlockRowFn pick_kernel(int P, int Tn, bool fast, int recipe, DType dt) {
    BlockRowFn f = nullptr;
    if (fast) {
        const int mode = mode_of(true, recipe, dt);
        if (P == 14 && Tn == 2) f = pick_shape<14, 2>(mode);
        if (P == 14 && Tn == 1) f = pick_shape<14, 1>(mode);
        if (P == 16 && Tn == 2) f = pick_shape<16, 2>(mode);
        if (P == 16 && Tn == 1) f = pick_shape<16, 1>(mode);
    }
    if (f) return f;
    if (dt == DType::Float32) return block_row_entry<float, 0, 0, kAnyMode>;
    return block_row_entry<uint16_t, 0, 0, kAnyMode>;
}
// Channel-last patches (PatchOrder::ChannelLast: merge 1, temporal 1): a patch line's 3P values
// are its pixels' bytes in order, 16 values per vector. Vector k of a line starts at pixel
// 16k / 3; its lanes' source bytes and channels repeat every three vectors (48 values, 16 pixels),
// so three vpermb controls and three sets of lane constants serve every line. Bytes past the
// line's valid pixels load as 0, which normalizes to the table's value for 0: the padding.
template <typename T, int kMode>
SMG_AVX512 void channels_last_avx512(const ImageView& band, const PatchLayout& L, const SimdNorm& n, DType dt_rt,
                                     T* dst, int bh) {
    const bool fast = kMode == kAnyMode ? n.fast : bool(kMode & 1);
    const int recipe = kMode == kAnyMode ? n.recipe : (kMode >> 1) & 1;
    const DType dt = kMode == kAnyMode ? dt_rt : DType(kMode >> 2);
    const int P = L.patch, C = band.channels, line_values = 3 * P;
    constexpr __mmask64 kLow = 0x1111111111111111ULL;  // byte 0 of each int32 lane
    alignas(64) uint8_t ctrl_b[3][64] = {};
    LaneNorm ln[3];
    for (int k = 0; k < 3; ++k) {
        uint8_t ch[16];
        for (int i = 0; i < 16; ++i) {
            const int v = 16 * k + i, px = v / 3 - (16 * k) / 3;
            ch[i] = uint8_t(v % 3);
            ctrl_b[k][4 * i] = uint8_t(C * px + ch[i]);
        }
        ln[k] = lane_norm(n, ch);
    }
    const int64_t row_elems = patch_row_elems(L);
    for (int gx = 0; gx < L.grid_w; ++gx) {
        T* out = dst + (int64_t(bh) * L.grid_w + gx) * row_elems;
        const int x0 = gx * P;
        const int valid_x = std::max(0, std::min(P, band.width - x0));
        for (int py = 0; py < P; ++py) {
            const int valid = py < band.height ? valid_x : 0;  // pixels of this line inside the band
            const uint8_t* src =
                band.data + int64_t(py < band.height ? py : 0) * band.stride + (valid > 0 ? int64_t(x0) * C : 0);
            T* o = out + int64_t(py) * line_values;
            for (int v0 = 0, k = 0; v0 < line_values; v0 += 16, k = k == 2 ? 0 : k + 1) {
                const int px0 = v0 / 3;
                const int avail = std::max(0, (valid - px0) * C);  // source bytes left from px0
                const __mmask64 load = avail >= 64 ? ~0ULL : ((1ULL << avail) - 1);
                const __m512i seg = _mm512_maskz_loadu_epi8(load, avail > 0 ? src + int64_t(px0) * C : src);
                const __m512i u = _mm512_maskz_permutexvar_epi8(kLow, _mm512_load_si512(ctrl_b[k]), seg);
                const __m512i r = normalize16(u, n, ln[k], dt, fast, recipe);
                const int left = line_values - v0;
                const __mmask16 lanes = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
                if constexpr (sizeof(T) == 4) {
                    _mm512_mask_storeu_epi32(o + v0, lanes, r);
                } else {
                    _mm256_mask_storeu_epi16(o + v0, lanes, _mm512_cvtepi32_epi16(r));
                }
            }
        }
    }
}

template <typename T, int kMode>
void channels_last_entry(const ImageView& band, const PatchLayout& L, const SimdNorm& n, DType dt, void* dst, int bh) {
    channels_last_avx512<T, kMode>(band, L, n, dt, static_cast<T*>(dst), bh);
}

// Fast float32 rescale-and-normalize compiled with its mode fixed (Gemma 4, SigLIP 2); every
// other normalization reads its mode at run time.
BlockRowFn pick_channels_last(bool fast, int recipe, DType dt) {
    if (fast && recipe == 0 && dt == DType::Float32)
        return channels_last_entry<float, mode_of(true, 0, DType::Float32)>;
    if (dt == DType::Float32) return channels_last_entry<float, kAnyMode>;
    return channels_last_entry<uint16_t, kAnyMode>;
}
#pragma GCC diagnostic pop
}  // namespace

bool patchify_prepare_avx512(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep) {
    // Fastest first: single precision, else the reference's double-precision order.
    for (const bool fast : {true, false}) {
        const SimdNorm n = simd_norm(params, fast);
        if (!simd_matches_lut(n, dt, lut)) continue;
        prep.norm = n;
        prep.form = int(fast);
        prep.label = fast ? "avx512-fast" : "avx512";
        return true;
    }
    return false;
}

void patchify_avx512(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void*,
                     void* dst, int bh) {
    const DefaultFpEnv fp_env;  // the arithmetic forms were checked under it
    const SimdNorm& n = prep.norm;
    pick_kernel(L.patch, L.temporal, n.fast, n.recipe, dt)(band, L, n, dt, dst, bh);
}

void patchify_avx512_channels_last(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt,
                                   const void*, void* dst, int bh) {
    const DefaultFpEnv fp_env;  // the arithmetic forms were checked under it
    const SimdNorm& n = prep.norm;
    pick_channels_last(n.fast, n.recipe, dt)(band, L, n, dt, dst, bh);
}

}  // namespace smg
#endif
