#include "resample/passes.hpp"

#include <algorithm>
#include <cstring>

#include "cpu.hpp"
#include "kernel_log.hpp"

#if SMG_X86
#include <immintrin.h>
#endif

namespace smg {

namespace {

// ---- vertical pass: out[x] = clip(sum_j row_j[x] * k[j]) over a whole row of bytes ----

// The portable loop, inlined into one function per ISA below so that the compiler vectorizes it
// for that ISA; which one runs is chosen by vertical_kernel() under the SMG_FAST_ISA cap (an
// ifunc's choice, as with target_clones, would ignore the cap).
__attribute__((always_inline)) inline void vertical_row_body(const uint8_t* first, int64_t stride, const int32_t* k,
                                                             int taps, uint8_t* out, int len) {
    constexpr int kChunk = 512;  // accumulators stay in L1
    int32_t acc[kChunk];
    for (int x0 = 0; x0 < len; x0 += kChunk) {
        const int m = std::min(kChunk, len - x0);
        for (int i = 0; i < m; ++i) acc[i] = kHalf;
        for (int j = 0; j < taps; ++j) {
            const uint8_t* r = first + j * stride + x0;
            const int32_t kj = k[j];
            for (int i = 0; i < m; ++i) acc[i] += int32_t(r[i]) * kj;
        }
        for (int i = 0; i < m; ++i) {
            const int32_t v = acc[i] >> kPrecisionBits;
            out[x0 + i] = uint8_t(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
}

void vertical_row_scalar(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    vertical_row_body(first, stride, k, taps, out, len);
}

#if SMG_X86
// 16-byte SSE2 steps (pmaddwd on split weights), the portable loop for the rest.
void vertical_row_sse2(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    const int done = vertical_row_sse2_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}
#endif

#if SMG_X86
// Register-blocked 64-byte steps, the compiler's AVX2 loop for the rest.
__attribute__((target("avx2"))) void vertical_row_avx2(const uint8_t* first, int64_t stride, const int32_t* k, int taps,
                                                       uint8_t* out, int len) {
    const int done = vertical_row_avx2_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}

// AVX-512: 64 output bytes per step, four int32 accumulators, exact integer sums as above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 AVX-512 header false positive
#pragma GCC diagnostic ignored "-Wuninitialized"
// clip8 on 16 lanes: shift, clamp below at 0, saturate above at 255 while narrowing.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m128i clip8_x16(__m512i v) {
    return _mm512_cvtusepi32_epi8(_mm512_max_epi32(_mm512_srai_epi32(v, kPrecisionBits), _mm512_setzero_si512()));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void vertical_row_avx512(const uint8_t* first, int64_t stride,
                                                                              const int32_t* k, int taps, uint8_t* out,
                                                                              int len) {
    const __m512i half = _mm512_set1_epi32(kHalf);
    int x = 0;
    for (; x + 64 <= len; x += 64) {
        __m512i a0 = half, a1 = half, a2 = half, a3 = half;
        const uint8_t* r = first + x;
        for (int j = 0; j < taps; ++j, r += stride) {
            const __m512i kj = _mm512_set1_epi32(k[j]);
            a0 = _mm512_add_epi32(a0,
                                  _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r))), kj));
            a1 = _mm512_add_epi32(
                a1, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 16))), kj));
            a2 = _mm512_add_epi32(
                a2, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 32))), kj));
            a3 = _mm512_add_epi32(
                a3, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(r + 48))), kj));
        }
        _mm_storeu_si128((__m128i*)(out + x), clip8_x16(a0));
        _mm_storeu_si128((__m128i*)(out + x + 16), clip8_x16(a1));
        _mm_storeu_si128((__m128i*)(out + x + 32), clip8_x16(a2));
        _mm_storeu_si128((__m128i*)(out + x + 48), clip8_x16(a3));
    }
    if (x < len) vertical_row_body(first + x, stride, k, taps, out + x, len - x);
}

#pragma GCC diagnostic pop
#endif

// ---- horizontal pass, one row ----

// CI channels in, the first CO of them out (CO < CI drops RGBX's pad byte on the way).
template <int CI, int CO = CI>
void horizontal_row_scalar(const uint8_t* in, const AxisWeights& kn, uint8_t* out, int out_w) {
    const int taps = kn.taps;
    for (int xx = 0; xx < out_w; ++xx) {
        const uint8_t* p = in + int64_t(kn.start[xx]) * CI;
        const int32_t* k = &kn.weights[size_t(xx) * taps];
        int32_t ss[CO];
        for (int c = 0; c < CO; ++c) ss[c] = kHalf;
        for (int j = 0; j < taps; ++j)
            for (int c = 0; c < CO; ++c) ss[c] += int32_t(p[j * CI + c]) * k[j];
        for (int c = 0; c < CO; ++c) out[xx * CO + c] = clip8(ss[c]);
    }
}

#if SMG_X86
// 3 or 4 channels: one pixel's channels in the int32 lanes of an SSE register. Reads 4 bytes per
// source pixel, so for C == 3 the caller guarantees one readable byte after the row.
template <int CI, int CO = CI>
__attribute__((target("avx2"))) void horizontal_row_sse(const uint8_t* in, const AxisWeights& kn, uint8_t* out,
                                                        int out_w, int x_begin = 0, int x_end = -1) {
    const int taps = kn.taps;
    const __m128i zero = _mm_setzero_si128();
    if (x_end < 0) x_end = out_w;
    for (int xx = x_begin; xx < x_end; ++xx) {
        const uint8_t* p = in + int64_t(kn.start[xx]) * CI;
        const int32_t* k = &kn.weights[size_t(xx) * taps];
        __m128i acc = _mm_set1_epi32(kHalf);
        for (int j = 0; j < taps; ++j) {
            uint32_t v;
            std::memcpy(&v, p + j * CI, 4);
            const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(int(v)));
            acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[j])));
        }
        acc = _mm_srai_epi32(acc, kPrecisionBits);
        const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, zero), zero);
        const uint32_t r = uint32_t(_mm_cvtsi128_si32(packed));
        if (CO == 4 || xx + 1 < out_w) {
            std::memcpy(out + xx * CO, &r, 4);  // for CO == 3 the 4th byte is rewritten next
        } else {
            std::memcpy(out + xx * CO, &r, 3);
        }
    }
}

// RGB with AVX-512 VBMI: 16 output pixels per group, one channel per register. The source
// pixels a group reads lie in a 128-byte window (checked per group when planning), so each tap
// is one vpermi2b that drops the right byte into every int32 lane, one multiply, one add.
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _undefined_ intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <bool VNNI>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) inline __m512i dot_pairs(__m512i acc, __m512i a,
                                                                                         __m512i b) {
    if constexpr (VNNI) return _mm512_dpwssd_epi32(acc, a, b);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
}

// kPairs: the plan's tap pairs when known at compile time (0: read from the plan); with it fixed
// the channel and pair loops unroll into independent accumulator chains.
template <int C, int CO, bool VNNI, int kPairs>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni"))) void horizontal_row_vbmi_impl(
    const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out, int out_w) {
    const int64_t row_bytes = int64_t(in_w) * C;
    const __m512i half = _mm512_set1_epi32(kHalf);
    const __m512i zero = _mm512_setzero_si512();
    constexpr __mmask64 kPair = 0x5555555555555555ULL;  // bytes 0 and 2 of each int32 lane
    // The channels' int32 results are narrowed with two saturating packs, which interleave
    // 128-bit lanes: byte 16 * l + 4 * k + j of the packed vector holds channel k, pixel
    // 4 * l + j. One vpermb then puts the pixels' CO channels next to each other.
    alignas(64) uint8_t ilv_b[64];
    for (int i = 0; i < 64; ++i) {
        const int px = i / CO, c = i % CO;
        ilv_b[i] = uint8_t(i < 16 * CO ? 16 * (px / 4) + 4 * c + px % 4 : 0);
    }
    const __m512i ilv = _mm512_load_si512(ilv_b);
    const int groups = (out_w + 15) / 16;
    const int pairs = kPairs ? kPairs : plan.pairs;
    for (int g = 0; g < groups; ++g) {
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        if (!plan.fits[g]) {
            horizontal_row_sse<C, CO>(in, kn, out, out_w, x0, x0 + n);
            continue;
        }
        const int64_t off = int64_t(plan.base[g]) * C;
        const int64_t avail = row_bytes - off;
        const __mmask64 m0 = avail >= 64 ? ~0ULL : ((1ULL << avail) - 1);
        const __mmask64 m1 = avail >= 128 ? ~0ULL : (avail > 64 ? ((1ULL << (avail - 64)) - 1) : 0);
        // Plain loads where the whole window is inside the row (masked loads are slower).
        const __m512i w0 = avail >= 64 ? _mm512_loadu_si512(in + off) : _mm512_maskz_loadu_epi8(m0, in + off);
        const __m512i w1 =
            avail >= 128 ? _mm512_loadu_si512(in + off + 64) : _mm512_maskz_loadu_epi8(m1, in + off + 64);
        const __m512i idx0 = _mm512_load_si512(plan.offsets[g].b);
        const Vec64* wt = &plan.weights[size_t(g) * pairs * 2];
        __m512i ch[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
        for (int c = 0; c < CO; ++c) {
            __m512i lo = zero, hi = zero;
#pragma GCC unroll 8
            for (int q = 0; q < pairs; ++q) {
                const __m512i idx = _mm512_add_epi8(idx0, _mm512_set1_epi8(char(2 * C * q + c)));
                const __m512i v = _mm512_maskz_permutex2var_epi8(kPair, w0, idx, w1);  // int16 pixel pairs
                lo = dot_pairs<VNNI>(lo, v, _mm512_load_si512(wt[2 * q].b));
                hi = dot_pairs<VNNI>(hi, v, _mm512_load_si512(wt[2 * q + 1].b));
            }
            // Pillow's (ss >> 22); clip8's clamp to 0..255 is the two saturating packs below
            // (the shifted sums are far inside int16).
            ch[c] = _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 11), lo), half),
                                      kPrecisionBits);
        }
        const __m512i packed =
            _mm512_packus_epi16(_mm512_packus_epi32(ch[0], ch[1]), _mm512_packus_epi32(ch[2], ch[3]));
        const __m512i rgb = _mm512_permutexvar_epi8(ilv, packed);
        const __mmask64 store = CO * n >= 64 ? ~0ULL : ((1ULL << (CO * n)) - 1);
        _mm512_mask_storeu_epi8(out + int64_t(x0) * CO, store, rgb);
    }
}

template <int C, int CO, bool VNNI>
void horizontal_row_vbmi_pairs(const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out,
                               int out_w) {
    switch (plan.pairs) {  // upscaling: 4 nonzero taps (BICUBIC), 6 (LANCZOS); mild downscaling: 5-8
        case 2: horizontal_row_vbmi_impl<C, CO, VNNI, 2>(in, in_w, kn, plan, out, out_w); break;
        case 3: horizontal_row_vbmi_impl<C, CO, VNNI, 3>(in, in_w, kn, plan, out, out_w); break;
        case 4: horizontal_row_vbmi_impl<C, CO, VNNI, 4>(in, in_w, kn, plan, out, out_w); break;
        case 5: horizontal_row_vbmi_impl<C, CO, VNNI, 5>(in, in_w, kn, plan, out, out_w); break;
        default: horizontal_row_vbmi_impl<C, CO, VNNI, 0>(in, in_w, kn, plan, out, out_w); break;
    }
}

template <int C, int CO = C>
void horizontal_row_vbmi(const uint8_t* in, int in_w, const AxisWeights& kn, const VbmiPlan& plan, uint8_t* out,
                         int out_w, KernelId kernel) {
    if (kernel == KernelId::HorizontalAvx512Vnni) {
        horizontal_row_vbmi_pairs<C, CO, true>(in, in_w, kn, plan, out, out_w);
    } else {
        horizontal_row_vbmi_pairs<C, CO, false>(in, in_w, kn, plan, out, out_w);
    }
}
#pragma GCC diagnostic pop
#endif

// plan.kernel: make_hplan's choice for these rows.
void horizontal_row(const uint8_t* in, int in_w, int channels, int out_channels, const AxisWeights& kn,
                    const HPlan& plan, uint8_t* out, int out_w, bool may_overread) {
#if SMG_X86
    const KernelId kernel = plan.kernel;
    if (kernel == KernelId::HorizontalAvx512Vbmi || kernel == KernelId::HorizontalAvx512Vnni) {
        if (channels == 4 && out_channels == 3) {  // RGBX in, RGB out
            horizontal_row_vbmi<4, 3>(in, in_w, kn, plan.vbmi, out, out_w, kernel);
        } else if (channels == 4) {
            horizontal_row_vbmi<4>(in, in_w, kn, plan.vbmi, out, out_w, kernel);
        } else if (!may_overread) {
            // The per-pixel fallback inside may read one byte past the row: give it a padded copy.
            ScratchBuffer pad(size_t(in_w) * 3 + 16);
            std::memcpy(pad.as<uint8_t>(), in, size_t(in_w) * 3);
            horizontal_row_vbmi<3>(pad.as<uint8_t>(), in_w, kn, plan.vbmi, out, out_w, kernel);
        } else {
            horizontal_row_vbmi<3>(in, in_w, kn, plan.vbmi, out, out_w, kernel);
        }
        return;
    }
    if (kernel == KernelId::HorizontalSse2) {
        if (channels == 3 && !may_overread) {  // it reads one byte past the last pixel
            ScratchBuffer pad(size_t(in_w) * 3 + 16);
            std::memcpy(pad.as<uint8_t>(), in, size_t(in_w) * 3);
            horizontal_row_sse2(pad.as<uint8_t>(), 3, 3, kn, plan.sse2, out, out_w);
        } else {
            horizontal_row_sse2(in, channels, out_channels, kn, plan.sse2, out, out_w);
        }
        return;
    }
#else
    (void)in_w;
    (void)plan;
    (void)may_overread;
#endif
    if (channels == 4 && out_channels == 3) {
        horizontal_row_scalar<4, 3>(in, kn, out, out_w);
        return;
    }
    switch (channels) {
        case 1: horizontal_row_scalar<1>(in, kn, out, out_w); break;
        case 2: horizontal_row_scalar<2>(in, kn, out, out_w); break;
        case 3: horizontal_row_scalar<3>(in, kn, out, out_w); break;
        default: horizontal_row_scalar<4>(in, kn, out, out_w); break;
    }
}

}  // namespace

namespace {

VbmiPlan make_vbmi_plan(const AxisWeights& kn, int out_w, int C) {
    const int groups = (out_w + 15) / 16, taps = kn.taps;
    VbmiPlan p;
    p.pairs = (taps + 1) / 2;
    p.base.resize(groups);
    p.fits.resize(groups);
    p.offsets.assign(groups, Vec64{});
    p.weights.assign(size_t(groups) * p.pairs * 2, Vec64{});
    for (int g = 0; g < groups; ++g) {
        const int x0 = g * 16, n = std::min(16, out_w - x0);
        // Trimmed windows (see AxisWeights) need not start in increasing order.
        const auto [lo, hi] = std::minmax_element(kn.start.begin() + x0, kn.start.begin() + x0 + n);
        p.base[g] = *lo;
        p.fits[g] = (*hi - p.base[g] + taps) * C <= 128;
        for (int i = 0; i < n && p.fits[g]; ++i) {
            const int off = C * (kn.start[x0 + i] - p.base[g]);
            p.offsets[g].b[4 * i] = uint8_t(off);
            p.offsets[g].b[4 * i + 2] = uint8_t(off + C);
            for (int j = 0; j < taps; ++j) {
                const int32_t w = kn.weights[size_t(x0 + i) * taps + j];
                const int16_t lo = int16_t(w & 2047), hi = int16_t(w >> 11);
                Vec64* pair = &p.weights[(size_t(g) * p.pairs + j / 2) * 2];
                std::memcpy(&pair[0].b[4 * i + 2 * (j % 2)], &lo, 2);
                std::memcpy(&pair[1].b[4 * i + 2 * (j % 2)], &hi, 2);
            }
        }
    }
    return p;
}

}  // namespace

HPlan make_hplan(const AxisWeights& kn, int in_w, int out_w, int C, int CO) {
    HPlan p;
    // 1 and 2 channels: the scalar kernel (see horizontal_kernel()).
    p.kernel = C >= 3 ? horizontal_kernel() : KernelId::HorizontalScalar;
    if (p.kernel == KernelId::HorizontalAvx512Vbmi || p.kernel == KernelId::HorizontalAvx512Vnni)
        p.vbmi = make_vbmi_plan(kn, out_w, C);
    if (p.kernel == KernelId::HorizontalAvx2) p.avx2 = make_avx2_hplan(kn, in_w, out_w, C, CO);
    if (p.kernel == KernelId::HorizontalSse2 && !make_sse2_hplan(kn, out_w, p.sse2))
        p.kernel = KernelId::HorizontalScalar;
    return p;
}

// Rows the AVX2 horizontal kernel takes together (one read of each chunk's plan from L2).
constexpr int kAvx2Rows = 4;

// Source rows [row0 + y0, row0 + y1) through the horizontal kernel into out rows [0, y1 - y0).
void horizontal_rows(const ImageView& src, int row0, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride,
                     int out_w, int out_channels, const AxisWeights& kn, const HPlan& plan) {
    if (y0 < y1) note_ran(plan.kernel);
#if SMG_X86
    if (plan.kernel == KernelId::HorizontalAvx2) {  // reads only the rows' bytes
        for (int64_t y = y0; y < y1; y += kAvx2Rows) {
            const int n = int(std::min<int64_t>(kAvx2Rows, y1 - y));
            horizontal_rows_avx2(src.data + (row0 + y) * src.stride, src.stride, kn, plan.avx2,
                                 out + (y - y0) * out_stride, out_stride, out_w, n);
        }
        return;
    }
#endif
    for (int64_t y = y0; y < y1; ++y) {
        const int64_t sy = row0 + y;
        // Reading one byte past a row is safe when another row follows. (Stride slack need not
        // follow the last row: a view that skips bytes before each row ends with its last pixel.)
        const bool may_overread = sy + 1 < src.height;
        horizontal_row(src.data + sy * src.stride, src.width, src.channels, out_channels, kn, plan,
                       out + (y - y0) * out_stride, out_w, may_overread);
    }
}

// Output rows [y0, y1) of the vertical kernel into out rows [0, y1 - y0). `shift` is subtracted
// from Pillow's bounds (the horizontal pass may have produced only rows [shift, ...)).
void vertical_rows(const ImageView& src, int shift, int64_t y0, int64_t y1, uint8_t* out, int64_t out_stride, int out_w,
                   const AxisWeights& kn) {
    const int len = out_w * src.channels;
    const KernelId kernel = vertical_kernel();
    if (y0 < y1) note_ran(kernel);
    for (int64_t yy = y0; yy < y1; ++yy) {
        const int ymin = kn.pil_min[yy] - shift;
        const int32_t* k = &kn.weights[size_t(yy) * kn.taps] + (kn.pil_min[yy] - kn.start[yy]);
        const uint8_t* first = src.data + int64_t(ymin) * src.stride;
        uint8_t* o = out + (yy - y0) * out_stride;
        switch (kernel) {
#if SMG_X86
            case KernelId::VerticalAvx512: vertical_row_avx512(first, src.stride, k, kn.pil_len[yy], o, len); break;
            case KernelId::VerticalAvx2: vertical_row_avx2(first, src.stride, k, kn.pil_len[yy], o, len); break;
            case KernelId::VerticalSse2: vertical_row_sse2(first, src.stride, k, kn.pil_len[yy], o, len); break;
#endif
            default: vertical_row_scalar(first, src.stride, k, kn.pil_len[yy], o, len); break;
        }
    }
}

// NEAREST: Pillow's ImagingScaleAffine, with its running double sums and its fill of pixels
// whose source coordinate falls outside the image.
std::vector<int> nearest_table(int in_size, int out_size) {
    const double a = double(float(in_size)) / out_size;
    std::vector<int> tab(out_size, -1);
    double o = a * 0.5;
    for (int i = 0; i < out_size; ++i) {
        const int v = o < 0.0 ? -1 : int(o);
        if (v >= 0 && v < in_size) tab[i] = v;
        o += a;
    }
    return tab;
}

void nearest_rows(const ImageView& src, const std::vector<int>& xin, const std::vector<int>& yin, int64_t y0,
                  int64_t y1, uint8_t* out_base, int64_t out_stride) {
    const int C = src.channels;
    const int out_w = int(xin.size());
    for (int64_t y = y0; y < y1; ++y) {
        uint8_t* out = out_base + (y - y0) * out_stride;
        if (yin[y] < 0) {
            std::memset(out, 0, size_t(out_w) * C);
            continue;
        }
        const uint8_t* in = src.data + int64_t(yin[y]) * src.stride;
        for (int x = 0; x < out_w; ++x) {
            if (xin[x] < 0) {
                std::memset(out + x * C, 0, C);
            } else {
                std::memcpy(out + x * C, in + int64_t(xin[x]) * C, C);
            }
        }
    }
}

}  // namespace smg
