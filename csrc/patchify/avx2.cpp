// AVX2 normalize + patchify, any patch size. Per band: the interleaved RGB / RGBX rows are split
// into three zero-padded planes (so no patch needs edge handling), then each pixel row of each
// channel of a patch becomes 16 values from one 16-byte load, computed in registers (Avx2Form)
// and written with 32-byte stores, once per temporal copy.
#include "patchify/kernels.hpp"

#if SMG_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "fp_env.hpp"
#include "scratch.hpp"

namespace smg {

namespace {

// How a value is computed: the single-precision form (as the AVX-512 fast form), or a gather from
// the table (exact by construction; on AVX2 hosts faster than the reference's double-precision
// order for Kimi, and about as fast for the others). Whichever is used has been checked against
// all 768 table values.
enum class Avx2Form : int { Fast = 0, Gather = 1 };

#define SMG_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SMG_INLINE __attribute__((always_inline)) inline

// Compile-time kernel mode: bits 0-1 form, bit 2 recipe, bits 3-4 dtype.
constexpr int mode_of(Avx2Form form, int recipe, DType dt) { return int(form) | (recipe << 2) | (int(dt) << 3); }
constexpr Avx2Form form_of(int mode) { return Avx2Form(mode & 3); }
constexpr int recipe_of(int mode) { return (mode >> 2) & 1; }
constexpr DType dtype_of(int mode) { return DType(mode >> 3); }

// One channel's constants, broadcast once per band.
struct Consts {
    __m256 k_hi, k_lo, mean, inv, std_;
    const void* lut;  // the channel's 256 table entries
};

SMG_AVX2 void set_consts(Consts& k, const SimdNorm& n, const void* lut, DType dt, int c) {
    k.k_hi = _mm256_set1_ps(n.k_hi);
    k.k_lo = _mm256_set1_ps(n.k_lo);
    k.mean = _mm256_set1_ps(n.mean[c]);
    k.inv = _mm256_set1_ps(n.inv[c]);
    k.std_ = _mm256_set1_ps(n.std_[c]);
    k.lut = static_cast<const unsigned char*>(lut) + c * 256 * dtype_size(dt);
}

// float32 values -> the output dtype's bits in int32 lanes (bfloat16: round to nearest even on
// the upper 16 bits; the values are finite) or, for float16, in the low 8 uint16 lanes.
template <DType dt>
SMG_AVX2 SMG_INLINE __m256i finish8(__m256 f) {
    const __m256i bits = _mm256_castps_si256(f);
    if constexpr (dt == DType::Float32) {
        return bits;
    } else if constexpr (dt == DType::BFloat16) {
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
        return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
    } else {
        return _mm256_castsi128_si256(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

// 8 pixel values (int32 lanes) -> 8 outputs (int32 lanes, see finish8): the fast form's IEEE
// operations (the AVX-512 kernel's), or the table's values gathered.
template <int kMode>
SMG_AVX2 SMG_INLINE __m256i normalize8(__m256i u, const Consts& k) {
    constexpr DType dt = dtype_of(kMode);
    if constexpr (form_of(kMode) == Avx2Form::Gather) {
        if constexpr (dt == DType::Float32) {
            return _mm256_castps_si256(_mm256_i32gather_ps(static_cast<const float*>(k.lut), u, 4));
        } else {  // 4 bytes from each 2-byte entry (the table has room past its end), low half kept
            const __m256i g = _mm256_i32gather_epi32(static_cast<const int*>(k.lut), u, 2);
            return _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
        }
    } else {
        // u * (k_hi + k_lo) as one FMA, then the division as x * (1/s) plus one FMA residual
        // correction (HF) or Kimi's multiplication; see the AVX-512 kernel.
        const __m256 uf = _mm256_cvtepi32_ps(u);
        __m256 f = _mm256_fmadd_ps(uf, k.k_hi, _mm256_mul_ps(uf, k.k_lo));
        f = _mm256_sub_ps(f, k.mean);
        if constexpr (recipe_of(kMode) == int(LutRecipe::HfRescaleNormalize)) {
            const __m256 q = _mm256_mul_ps(f, k.inv);
            f = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, k.std_, f), k.inv, q);
        } else {
            f = _mm256_mul_ps(f, k.inv);
        }
        return finish8<dt>(f);
    }
}

// 16 consecutive pixels of one channel -> their outputs: for float32 two vectors of 8 (a, b),
// for the 16-bit dtypes one vector of 16 (a).
struct Out16 {
    __m256i a, b;
};

template <int kMode>
SMG_AVX2 SMG_INLINE Out16 values16(const uint8_t* p, const Consts& k) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i lo = normalize8<kMode>(_mm256_cvtepu8_epi32(bytes), k);
    const __m256i hi = normalize8<kMode>(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)), k);
    if constexpr (dtype_of(kMode) == DType::Float32) {
        return {lo, hi};
    } else if constexpr (dtype_of(kMode) == DType::Float16 && form_of(kMode) != Avx2Form::Gather) {
        return {_mm256_permute2x128_si256(lo, hi, 0x20), hi};  // finish8 packed 8 halves per vector
    } else {  // 32-bit lanes holding 16-bit values: pack (unsigned saturation never bites), reorder
        return {_mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8), hi};
    }
}

// Stores the first `bytes` (1..31) of v.
SMG_AVX2 SMG_INLINE void store_partial(void* d, __m256i v, int bytes) {
    auto* o = static_cast<unsigned char*>(d);
    __m128i x = _mm256_castsi256_si128(v);
    if (bytes >= 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), x);
        x = _mm256_extracti128_si256(v, 1);
        o += 16, bytes -= 16;
    }
    if (bytes >= 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(o), x);
        x = _mm_srli_si128(x, 8);
        o += 8, bytes -= 8;
    }
    if (bytes >= 4) {
        const int32_t w = _mm_cvtsi128_si32(x);
        std::memcpy(o, &w, 4);
        x = _mm_srli_si128(x, 4);
        o += 4, bytes -= 4;
    }
    if (bytes >= 2) {
        const uint16_t h = uint16_t(_mm_extract_epi16(x, 0));
        std::memcpy(o, &h, 2);
    }
}

// The band's rows [0, rows) split into planes c = 0..2 at planes + c * plane_bytes, `pitch`
// bytes per row: pixels past the band's width or height are 0 (the reference's padding), up to
// the pitch (which leaves 16 bytes of slack past the grid for the 16-byte loads).
SMG_AVX2 void split_planes(const ImageView& band, int rows, int64_t pitch, int64_t plane_bytes, uint8_t* planes) {
    const int w = band.width, C = band.channels;
    // pshufb controls: for RGB, byte j of plane c comes from input vector j's positions; for
    // RGBX, each 16-byte vector (4 pixels) becomes R0..R3 G0..G3 B0..B3 X0..X3.
    alignas(16) int8_t ctl[3][3][16];
    for (int c = 0; c < 3; ++c)
        for (int v = 0; v < 3; ++v)
            for (int j = 0; j < 16; ++j) {
                const int src = 3 * j + c - 16 * v;  // byte of vector v holding pixel j's channel c
                ctl[c][v][j] = int8_t(src >= 0 && src < 16 ? src : -1);
            }
    const __m128i x4 = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int y = 0; y < rows; ++y) {
        uint8_t* o0 = planes + y * pitch;
        uint8_t* o1 = o0 + plane_bytes;
        uint8_t* o2 = o1 + plane_bytes;
        int x = 0;
        if (y < band.height) {
            const uint8_t* in = band.data + y * band.stride;
            if (C == 3) {
                for (; x + 16 <= w; x += 16) {
                    const __m128i* s = reinterpret_cast<const __m128i*>(in + 3 * x);
                    const __m128i v0 = _mm_loadu_si128(s), v1 = _mm_loadu_si128(s + 1), v2 = _mm_loadu_si128(s + 2);
                    uint8_t* outs[3] = {o0, o1, o2};
                    for (int c = 0; c < 3; ++c) {
                        const __m128i* k = reinterpret_cast<const __m128i*>(ctl[c]);
                        const __m128i p = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, _mm_load_si128(k)),
                                                                    _mm_shuffle_epi8(v1, _mm_load_si128(k + 1))),
                                                       _mm_shuffle_epi8(v2, _mm_load_si128(k + 2)));
                        _mm_storeu_si128(reinterpret_cast<__m128i*>(outs[c] + x), p);
                    }
                }
            } else {
                for (; x + 16 <= w; x += 16) {
                    const __m128i* s = reinterpret_cast<const __m128i*>(in + 4 * x);
                    const __m128i q0 = _mm_shuffle_epi8(_mm_loadu_si128(s), x4);
                    const __m128i q1 = _mm_shuffle_epi8(_mm_loadu_si128(s + 1), x4);
                    const __m128i q2 = _mm_shuffle_epi8(_mm_loadu_si128(s + 2), x4);
                    const __m128i q3 = _mm_shuffle_epi8(_mm_loadu_si128(s + 3), x4);
                    const __m128i rg01 = _mm_unpacklo_epi32(q0, q1), rg23 = _mm_unpacklo_epi32(q2, q3);
                    const __m128i bx01 = _mm_unpackhi_epi32(q0, q1), bx23 = _mm_unpackhi_epi32(q2, q3);
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(o0 + x), _mm_unpacklo_epi64(rg01, rg23));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(o1 + x), _mm_unpackhi_epi64(rg01, rg23));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(o2 + x), _mm_unpacklo_epi64(bx01, bx23));
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

// One pixel row's store: whole, or (the last rows of a patch) cut to the row's end.
template <typename T>
SMG_AVX2 SMG_INLINE void put(T* row, int e, int P, __m256i vec, bool exact) {
    constexpr int kLanes = 32 / sizeof(T);
    if (!exact || e + kLanes <= P) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + e), vec);
    } else {
        store_partial(row + e, vec, (P - e) * int(sizeof(T)));
    }
}

// The patch rows of block row bh from the planes. A patch row is written front to back (channel,
// copy, pixel row), each pixel row with whole vectors whose overflow lands on what is written
// next; only the last rows of the patch, whose overflow would leave it, are stored to their exact
// length. Copy 0's vectors are kept (in L1) and stored again for the other copies: one sequential
// stream of stores is faster than writing the copies side by side (float32), and computing once
// is faster than per copy (16-bit dtypes); measured on AMD Zen 3.
// kP, kT: patch size and temporal copies when known at compile time (0: read from L).
template <typename T, int kP, int kT, int kMode>
SMG_AVX2 void block_row_planes(const uint8_t* planes, int64_t pitch, int64_t plane_bytes, const PatchLayout& L,
                               const Consts* k, T* dst, int bh) {
    const int P = kP ? kP : L.patch, m = L.merge, Tn = kT ? kT : L.temporal;
    const int64_t pp = int64_t(P) * P, row_elems = 3 * Tn * pp;
    constexpr int kLanes = 32 / sizeof(T);       // elements per 32-byte store
    constexpr int kPerGroup = 16 / kLanes;       // stores per 16-pixel load: 2 (float32) or 1
    const int groups = (P + 15) / 16;            // 16-pixel loads per pixel row
    const int nvec = (P + kLanes - 1) / kLanes;  // stores per pixel row
    int first_exact = 0;                         // rows from here on would overflow the patch
    while (first_exact < P && int64_t(first_exact) * P + int64_t(nvec) * kLanes <= pp) ++first_exact;
    // P <= 64 whenever Tn > 1 (a larger patch is a whole image, one copy): kept is used then only
    constexpr int kMaxVec = (kP ? kP : 64) * ((kP ? kP : 64) + kLanes - 1) / kLanes;
    __m256i kept[kMaxVec];  // copy 0 of one channel, pixel row by pixel row
    const int blocks_w = L.grid_w / m;
    for (int bw = 0; bw < blocks_w; ++bw) {
        for (int mh = 0; mh < m; ++mh) {
            for (int mw = 0; mw < m; ++mw) {
                const int64_t r = ((int64_t(bh) * blocks_w + bw) * m + mh) * m + mw;
                T* out = dst + r * row_elems;
                const uint8_t* src = planes + int64_t(mh) * P * pitch + int64_t(bw * m + mw) * P;
                for (int c = 0; c < 3; ++c) {
                    const uint8_t* sc = src + c * plane_bytes;
                    T* o = out + c * Tn * pp;
                    const bool last = c == 2 && Tn == 1;
#pragma GCC unroll 16
                    for (int py = 0; py < P; ++py) {
                        for (int g = 0; g < groups; ++g) {
                            const Out16 v = values16<kMode>(sc + py * pitch + 16 * g, k[c]);
#pragma GCC unroll 2
                            for (int j = 0; j < kPerGroup; ++j) {
                                const int e = 16 * g + kLanes * j;  // first element of this store
                                if (e >= P) break;
                                const __m256i vec = j == 0 ? v.a : v.b;
                                put(o + py * P, e, P, vec, last && py >= first_exact);
                                if (Tn > 1) kept[py * nvec + e / kLanes] = vec;
                            }
                        }
                    }
                    for (int t = 1; t < Tn; ++t) {
                        T* ot = o + t * pp;
                        const bool last_copy = c == 2 && t == Tn - 1;
#pragma GCC unroll 16
                        for (int py = 0; py < P; ++py) {
                            for (int i = 0; i < nvec; ++i)
                                put(ot + py * P, i * kLanes, P, kept[py * nvec + i], last_copy && py >= first_exact);
                        }
                    }
                }
            }
        }
    }
}

using PlanesFn = void (*)(const uint8_t*, int64_t, int64_t, const PatchLayout&, const Consts*, void*, int);

template <typename T, int kP, int kT, int kMode>
void planes_entry(const uint8_t* planes, int64_t pitch, int64_t plane_bytes, const PatchLayout& L, const Consts* k,
                  void* dst, int bh) {
    block_row_planes<T, kP, kT, kMode>(planes, pitch, plane_bytes, L, k, static_cast<T*>(dst), bh);
}

template <int kP, int kT, int kMode>
constexpr PlanesFn entry_for() {
    return planes_entry<std::conditional_t<dtype_of(kMode) == DType::Float32, float, uint16_t>, kP, kT, kMode>;
}

template <int kMode>
PlanesFn pick_shape(int P, int Tn) {
    if (P == 14 && Tn == 2) return entry_for<14, 2, kMode>();
    if (P == 14 && Tn == 1) return entry_for<14, 1, kMode>();
    if (P == 16 && Tn == 2) return entry_for<16, 2, kMode>();
    if (P == 16 && Tn == 1) return entry_for<16, 1, kMode>();
    return entry_for<0, 0, kMode>();
}

template <DType dt>
PlanesFn pick_form(int P, int Tn, Avx2Form form, int recipe) {
    constexpr int kHf = int(LutRecipe::HfRescaleNormalize), kKimi = int(LutRecipe::KimiDivideMultiply);
    if (form == Avx2Form::Fast && recipe == kHf) return pick_shape<mode_of(Avx2Form::Fast, kHf, dt)>(P, Tn);
    if (form == Avx2Form::Fast && recipe == kKimi) return pick_shape<mode_of(Avx2Form::Fast, kKimi, dt)>(P, Tn);
    if (form == Avx2Form::Gather) return pick_shape<mode_of(Avx2Form::Gather, 0, dt)>(P, Tn);
    return nullptr;
}

PlanesFn pick_kernel(int P, int Tn, Avx2Form form, int recipe, DType dt) {
    switch (dt) {
        case DType::Float32: return pick_form<DType::Float32>(P, Tn, form, recipe);
        case DType::BFloat16: return pick_form<DType::BFloat16>(P, Tn, form, recipe);
        case DType::Float16: return pick_form<DType::Float16>(P, Tn, form, recipe);
        case DType::UInt8: break;  // never chosen: the Normalizer keeps uint8 on the table path
    }
    return nullptr;
}

bool avx2_matches_lut(const SimdNorm& n, Avx2Form form, DType dt, const void* lut) {
    // The kernel itself, on a one-patch layout whose 16 x 16 pixels of channel c are 0..255 in
    // order: its output (channel-major, one copy) is then exactly the table.
    const PlanesFn f = pick_kernel(16, 1, form, n.recipe, dt);
    if (!f) return false;
    const int64_t pitch = 16 + 16, plane_bytes = 16 * pitch;
    alignas(32) uint8_t planes[3 * 16 * pitch];
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 16; ++y)
            for (int x = 0; x < pitch; ++x) planes[c * plane_bytes + y * pitch + x] = uint8_t(x < 16 ? 16 * y + x : 0);
    Consts k[3];
    for (int c = 0; c < 3; ++c) set_consts(k[c], n, lut, dt, c);
    alignas(32) unsigned char got[3 * 256 * 4];
    f(planes, pitch, plane_bytes, PatchLayout{16, 1, 1, 1, 1}, k, got, 0);
    return std::memcmp(got, lut, size_t(3 * 256 * dtype_size(dt))) == 0;
}

}  // namespace

bool patchify_prepare_avx2(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep) {
    // Fastest first; the gather reads the table itself, so it matches whatever the constants.
    const SimdNorm fast = simd_norm(params, true), exact = simd_norm(params, false);
    if (avx2_matches_lut(fast, Avx2Form::Fast, dt, lut)) {
        prep = PatchifyPrep{fast, int(Avx2Form::Fast), "avx2-fast"};
    } else if (avx2_matches_lut(exact, Avx2Form::Gather, dt, lut)) {
        prep = PatchifyPrep{exact, int(Avx2Form::Gather), "avx2-gather"};
    } else {
        return false;
    }
    return true;
}

void patchify_avx2(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                   void* dst, int bh) {
    const SimdNorm& n = prep.norm;
    const Avx2Form form = Avx2Form(prep.form);
    const DefaultFpEnv fp_env;  // the fast form was checked under it
    const int rows = L.merge * L.patch;
    const int64_t pitch = int64_t(L.grid_w) * L.patch + 16;
    const int64_t plane_bytes = rows * pitch;
    ScratchBuffer planes(size_t(3 * plane_bytes));
    split_planes(band, rows, pitch, plane_bytes, planes.as<uint8_t>());
    Consts k[3];
    for (int c = 0; c < 3; ++c) set_consts(k[c], n, lut, dt, c);
    pick_kernel(L.patch, L.temporal, form, n.recipe, dt)(planes.as<uint8_t>(), pitch, plane_bytes, L, k, dst, bh);
}

}  // namespace smg
#endif
