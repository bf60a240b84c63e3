// NEON normalize + patchify, any patch size, channel-first and channel-last. Per band: the
// interleaved RGB / RGBX rows are split into three zero-padded planes (vld3 / vld4), so no patch
// needs edge handling; then 16 pixels of one channel at a time are computed and stored: in single
// precision (the AVX2 fast form's IEEE operations, its fused multiply-adds included) where that
// reproduces the normalization's 768 table values, else in the reference's own double-precision
// order (as the AVX-512 kernel's exact form), else (no such normalization is known) the table
// kernel takes it. prepare() checks whichever form it picks against the whole table.
#include "patchify/kernels.hpp"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "fp_env.hpp"
#include "scratch.hpp"

namespace smg {

namespace {

// How values are computed: the single-precision form or the reference's double-precision order,
// each for the HF recipe (rescale, subtract, divide) or Kimi's (divide by 255, subtract, multiply).
enum class Form : int { FastHf = 0, FastKimi = 1, ExactHf = 2, ExactKimi = 3 };

// One channel's constants, broadcast once per band.
struct Consts {
    float32x4_t k_hi, k_lo, mean, inv, std_;
    float64x2_t rescale, mean_d, inv_d;
};

Consts consts_of(const SimdNorm& n, int c) {
    return {vdupq_n_f32(n.k_hi),    vdupq_n_f32(n.k_lo),    vdupq_n_f32(n.mean[c]),   vdupq_n_f32(n.inv[c]),
            vdupq_n_f32(n.std_[c]), vdupq_n_f64(n.rescale), vdupq_n_f64(n.mean_d[c]), vdupq_n_f64(n.inv_d[c])};
}

// op(float64 lanes) applied to each half of x, each result rounded to float32 once.
template <class Op>
inline float32x4_t in_double(float32x4_t x, Op op) {
    return vcvt_high_f32_f64(vcvt_f32_f64(op(vcvt_f64_f32(vget_low_f32(x)))), op(vcvt_high_f64_f32(x)));
}

// 4 pixel values -> float32 values.
template <Form kForm>
inline float32x4_t values4(uint32x4_t u, const Consts& k) {
    const float32x4_t uf = vcvtq_f32_u32(u);  // exact: u < 256
    if constexpr (kForm == Form::FastHf || kForm == Form::FastKimi) {
        // u * (k_hi + k_lo) as one fused multiply-add, then the division as x * (1/s) plus one
        // fused residual correction (HF) or Kimi's multiplication.
        float32x4_t f = vsubq_f32(vfmaq_f32(vmulq_f32(uf, k.k_lo), uf, k.k_hi), k.mean);
        if constexpr (kForm == Form::FastHf) {
            const float32x4_t q = vmulq_f32(f, k.inv);
            return vfmaq_f32(q, vfmsq_f32(f, q, k.std_), k.inv);
        } else {
            return vmulq_f32(f, k.inv);
        }
    } else if constexpr (kForm == Form::ExactHf) {
        // f32(f64(u) * rescale), then float32 subtraction and division.
        const float32x4_t f = in_double(uf, [&](float64x2_t d) { return vmulq_f64(d, k.rescale); });
        return vdivq_f32(vsubq_f32(f, k.mean), k.std_);
    } else {
        // Each step in double, each result rounded to float32 (build_lut's Kimi order).
        float32x4_t f = in_double(uf, [](float64x2_t d) { return vdivq_f64(d, vdupq_n_f64(255.0)); });
        f = in_double(f, [&](float64x2_t d) { return vsubq_f64(d, k.mean_d); });
        return in_double(f, [&](float64x2_t d) { return vmulq_f64(d, k.inv_d); });
    }
}

// 4 pixel values -> the output dtype's bits: float32's, or a 16-bit value in each lane's low half
// (bfloat16: round to nearest even on the upper 16 bits, the values being finite).
template <DType dt, Form kForm>
inline uint32x4_t normalize4(uint32x4_t u, const Consts& k) {
    const float32x4_t f = values4<kForm>(u, k);
    const uint32x4_t bits = vreinterpretq_u32_f32(f);
    if constexpr (dt == DType::Float32) {
        return bits;
    } else if constexpr (dt == DType::BFloat16) {
        const uint32x4_t lsb = vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1));
        return vshrq_n_u32(vaddq_u32(vaddq_u32(bits, vdupq_n_u32(0x7fff)), lsb), 16);
    } else {
        return vmovl_u16(vreinterpret_u16_f16(vcvt_f16_f32(f)));
    }
}

// 16 consecutive pixels of one channel -> their 16 outputs, in 4 vectors of 4.
template <DType dt, Form kForm>
inline void values16(const uint8_t* p, const Consts& k, uint32x4_t v[4]) {
    const uint8x16_t b = vld1q_u8(p);
    const uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_high_u8(b);
    v[0] = normalize4<dt, kForm>(vmovl_u16(vget_low_u16(lo)), k);
    v[1] = normalize4<dt, kForm>(vmovl_high_u16(lo), k);
    v[2] = normalize4<dt, kForm>(vmovl_u16(vget_low_u16(hi)), k);
    v[3] = normalize4<dt, kForm>(vmovl_high_u16(hi), k);
}

inline uint16x8_t narrow8(uint32x4_t a, uint32x4_t b) { return vcombine_u16(vmovn_u32(a), vmovn_u32(b)); }

// The first n (1..16) of 16 outputs to o.
template <typename T>
inline void store16(T* o, const uint32x4_t v[4], int n) {
    T tmp[16];
    T* d = n == 16 ? o : tmp;
    if constexpr (sizeof(T) == 4) {
        for (int i = 0; i < 4; ++i) vst1q_u32(reinterpret_cast<uint32_t*>(d) + 4 * i, v[i]);
    } else {
        vst1q_u16(reinterpret_cast<uint16_t*>(d), narrow8(v[0], v[1]));
        vst1q_u16(reinterpret_cast<uint16_t*>(d) + 8, narrow8(v[2], v[3]));
    }
    if (n < 16) std::memcpy(o, tmp, sizeof(T) * size_t(n));
}

// The first n (1..16) pixels of three channels' 16 outputs to o, interleaved (r, g, b per pixel).
template <typename T>
inline void store16x3(T* o, const uint32x4_t r[4], const uint32x4_t g[4], const uint32x4_t b[4], int n) {
    T tmp[48];
    T* d = n == 16 ? o : tmp;
    if constexpr (sizeof(T) == 4) {
        for (int i = 0; i < 4; ++i)
            vst3q_u32(reinterpret_cast<uint32_t*>(d) + 12 * i, uint32x4x3_t{{r[i], g[i], b[i]}});
    } else {
        for (int i = 0; i < 2; ++i) {
            const uint16x8x3_t v{
                {narrow8(r[2 * i], r[2 * i + 1]), narrow8(g[2 * i], g[2 * i + 1]), narrow8(b[2 * i], b[2 * i + 1])}};
            vst3q_u16(reinterpret_cast<uint16_t*>(d) + 24 * i, v);
        }
    }
    if (n < 16) std::memcpy(o, tmp, sizeof(T) * 3 * size_t(n));
}

// The band's rows [0, rows) split into planes c = 0..2 at planes + c * plane_bytes, `pitch` bytes
// per row: pixels past the band's width or height are 0 (the reference's padding), up to the
// pitch (which leaves 16 bytes of slack past the grid for the 16-byte loads).
void split_planes(const ImageView& band, int rows, int64_t pitch, int64_t plane_bytes, uint8_t* planes) {
    const int w = int(std::min<int64_t>(band.width, pitch - 16)), C = band.channels;  // pixels past the grid unread
    for (int y = 0; y < rows; ++y) {
        uint8_t* o0 = planes + y * pitch;
        uint8_t* o1 = o0 + plane_bytes;
        uint8_t* o2 = o1 + plane_bytes;
        int x = 0;
        if (y < band.height) {
            const uint8_t* in = band.data + y * band.stride;
            if (C == 3) {
                for (; x + 16 <= w; x += 16) {
                    const uint8x16x3_t v = vld3q_u8(in + 3 * x);
                    vst1q_u8(o0 + x, v.val[0]);
                    vst1q_u8(o1 + x, v.val[1]);
                    vst1q_u8(o2 + x, v.val[2]);
                }
            } else {
                for (; x + 16 <= w; x += 16) {
                    const uint8x16x4_t v = vld4q_u8(in + 4 * x);
                    vst1q_u8(o0 + x, v.val[0]);
                    vst1q_u8(o1 + x, v.val[1]);
                    vst1q_u8(o2 + x, v.val[2]);
                }
            }
            for (; x < w; ++x) {
                o0[x] = in[x * C];
                o1[x] = in[x * C + 1];
                o2[x] = in[x * C + 2];
            }
        }
        std::memset(o0 + x, 0, size_t(pitch - x));
        std::memset(o1 + x, 0, size_t(pitch - x));
        std::memset(o2 + x, 0, size_t(pitch - x));
    }
}

// The patch rows of block row bh (Patchifier::block_row's layout) from the planes; copies t >= 1
// of a channel are copied from copy 0.
template <DType dt, Form kForm, typename T>
void block_row_planes(const uint8_t* planes, int64_t pitch, int64_t plane_bytes, const PatchLayout& L, const Consts* k,
                      T* dst, int bh) {
    const int P = L.patch, m = L.merge, Tn = L.temporal;
    const int64_t pp = int64_t(P) * P, row_elems = 3 * Tn * pp;
    const int blocks_w = L.grid_w / m;
    uint32x4_t v[4];
    for (int bw = 0; bw < blocks_w; ++bw) {
        for (int mh = 0; mh < m; ++mh) {
            for (int mw = 0; mw < m; ++mw) {
                const int64_t r = ((int64_t(bh) * blocks_w + bw) * m + mh) * m + mw;
                T* out = dst + r * row_elems;
                const uint8_t* src = planes + int64_t(mh) * P * pitch + int64_t(bw * m + mw) * P;
                for (int c = 0; c < 3; ++c) {
                    const uint8_t* sc = src + c * plane_bytes;
                    T* o = out + c * Tn * pp;
                    for (int py = 0; py < P; ++py) {
                        for (int x = 0; x < P; x += 16) {
                            values16<dt, kForm>(sc + py * pitch + x, k[c], v);
                            store16(o + py * P + x, v, std::min(16, P - x));
                        }
                    }
                    for (int t = 1; t < Tn; ++t) std::memcpy(o + t * pp, o, sizeof(T) * size_t(pp));
                }
            }
        }
    }
}

// The channel-last patch rows of block row bh (merge 1, temporal 1) from the planes.
template <DType dt, Form kForm, typename T>
void channels_last_planes(const uint8_t* planes, int64_t pitch, int64_t plane_bytes, const PatchLayout& L,
                          const Consts* k, T* dst, int bh) {
    const int P = L.patch;
    const int64_t row_elems = patch_row_elems(L);
    uint32x4_t r[4], g[4], b[4];
    for (int gx = 0; gx < L.grid_w; ++gx) {
        T* out = dst + (int64_t(bh) * L.grid_w + gx) * row_elems;
        for (int py = 0; py < P; ++py) {
            const uint8_t* s = planes + py * pitch + int64_t(gx) * P;
            T* o = out + int64_t(py) * P * 3;
            for (int x = 0; x < P; x += 16) {
                values16<dt, kForm>(s + x, k[0], r);
                values16<dt, kForm>(s + plane_bytes + x, k[1], g);
                values16<dt, kForm>(s + 2 * plane_bytes + x, k[2], b);
                store16x3(o + 3 * x, r, g, b, std::min(16, P - x));
            }
        }
    }
}

using PlanesFn = void (*)(const uint8_t*, int64_t, int64_t, const PatchLayout&, const Consts*, void*, int);

template <DType dt, Form kForm, bool kLast>
void planes_entry(const uint8_t* planes, int64_t pitch, int64_t plane_bytes, const PatchLayout& L, const Consts* k,
                  void* dst, int bh) {
    using T = std::conditional_t<dt == DType::Float32, float, uint16_t>;
    if constexpr (kLast) {
        channels_last_planes<dt, kForm>(planes, pitch, plane_bytes, L, k, static_cast<T*>(dst), bh);
    } else {
        block_row_planes<dt, kForm>(planes, pitch, plane_bytes, L, k, static_cast<T*>(dst), bh);
    }
}

template <DType dt, bool kLast>
PlanesFn pick_form(Form form) {
    switch (form) {
        case Form::FastHf: return planes_entry<dt, Form::FastHf, kLast>;
        case Form::FastKimi: return planes_entry<dt, Form::FastKimi, kLast>;
        case Form::ExactHf: return planes_entry<dt, Form::ExactHf, kLast>;
        case Form::ExactKimi: return planes_entry<dt, Form::ExactKimi, kLast>;
    }
    return nullptr;
}

template <bool kLast>
PlanesFn pick(DType dt, Form form) {
    switch (dt) {
        case DType::Float32: return pick_form<DType::Float32, kLast>(form);
        case DType::BFloat16: return pick_form<DType::BFloat16, kLast>(form);
        case DType::Float16: return pick_form<DType::Float16, kLast>(form);
        case DType::UInt8: break;  // never prepared: the Normalizer copies uint8
    }
    return nullptr;
}

// Both forms on the band's planes: merge * patch rows of grid_w * patch pixels.
template <bool kLast>
void run(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, void* dst, int bh) {
    const DefaultFpEnv fp_env;  // the form was checked under it
    const int rows = L.merge * L.patch;
    const int64_t pitch = int64_t(L.grid_w) * L.patch + 16;
    const int64_t plane_bytes = rows * pitch;
    ScratchBuffer planes(size_t(3 * plane_bytes));
    split_planes(band, rows, pitch, plane_bytes, planes.as<uint8_t>());
    const Consts k[3] = {consts_of(prep.norm, 0), consts_of(prep.norm, 1), consts_of(prep.norm, 2)};
    pick<kLast>(dt, Form(prep.form))(planes.as<uint8_t>(), pitch, plane_bytes, L, k, dst, bh);
}

// Both forms on a one-patch 16 x 16 RGB image whose pixels hold 0..255 in every channel: the
// channel-first output is then exactly the table, the channel-last one the table interleaved.
bool neon_matches_lut(const PatchifyPrep& prep, DType dt, const void* lut) {
    if (!pick<false>(dt, Form(prep.form))) return false;
    uint8_t img[16 * 16 * 3];
    for (int u = 0; u < 256; ++u)
        for (int c = 0; c < 3; ++c) img[u * 3 + c] = uint8_t(u);
    const ImageView band{img, 16, 16, 3, 16 * 3};
    const PatchLayout L{16, 1, 1, 1, 1};
    const size_t es = size_t(dtype_size(dt)), bytes = 3 * 256 * es;
    alignas(16) unsigned char first[3 * 256 * 4], last[3 * 256 * 4], want_last[3 * 256 * 4];
    run<false>(band, L, prep, dt, first, 0);
    run<true>(band, L, prep, dt, last, 0);
    const auto* table = static_cast<const unsigned char*>(lut);
    for (int u = 0; u < 256; ++u)
        for (int c = 0; c < 3; ++c) std::memcpy(want_last + (u * 3 + c) * es, table + (c * 256 + u) * es, es);
    return std::memcmp(first, lut, bytes) == 0 && std::memcmp(last, want_last, bytes) == 0;
}

}  // namespace

bool patchify_prepare_neon(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep) {
    // Fastest first: single precision, else the reference's double-precision order.
    for (const bool fast : {true, false}) {
        const SimdNorm n = simd_norm(params, fast);
        const bool hf = n.recipe == int(LutRecipe::HfRescaleNormalize);
        const Form form = fast ? (hf ? Form::FastHf : Form::FastKimi) : (hf ? Form::ExactHf : Form::ExactKimi);
        const PatchifyPrep p{n, int(form), fast ? "neon-fast" : "neon"};
        if (neon_matches_lut(p, dt, lut)) {
            prep = p;
            return true;
        }
    }
    return false;
}

void patchify_neon(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void*,
                   void* dst, int bh) {
    run<false>(band, L, prep, dt, dst, bh);
}

void patchify_neon_channels_last(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt,
                                 const void*, void* dst, int bh) {
    run<true>(band, L, prep, dt, dst, bh);
}

}  // namespace smg
#endif
