// The resampler's row kernels in NEON (Advanced SIMD, part of AArch64 itself: the "baseline" cap's
// kernels there), exact to Pillow's sums through the split weights of resample/fixed.hpp: 16-bit
// pixels times 16-bit weight halves, widened into int32 sums (smlal), which every ARM core runs at
// full rate where 32-bit lane multiplies often take two issue slots. Horizontal: one output
// pixel's channels in four int32 lanes. Vertical: 16 output bytes per step.
#include "resample/kernels.hpp"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "resample/fixed.hpp"
#include "resample/row_loops.hpp"

namespace smg {

namespace {

struct NeonHPlan : HorizontalPlan {
    std::vector<int16_t> hi, lo;  // kn.weights split, in the same order (out_w * taps)

    size_t bytes() const override { return sizeof(*this) + (hi.capacity() + lo.capacity()) * sizeof(int16_t); }
};

// sh * 2^kSplitBits + sl + 2^21, shifted and clamped to 0..255 (clip8), in the low 4 bytes.
inline uint8x8_t finish4(int32x4_t sh, int32x4_t sl) {
    const int32x4_t ss = vaddq_s32(vaddq_s32(vshlq_n_s32(sh, kSplitBits), sl), vdupq_n_s32(kHalf));
    const uint16x4_t u16 = vqmovun_s32(vshrq_n_s32(ss, kPrecisionBits));  // negatives to 0
    return vqmovn_u16(vcombine_u16(u16, u16));                            // above 255 to 255
}

// 4 bytes from s (a pixel, or a 3-channel pixel and the next byte) as int16 lanes.
inline int16x4_t load_pixel(const uint8_t* s) {
    uint32_t v;
    std::memcpy(&v, s, 4);
    return vget_low_s16(vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(uint64_t(v)))));
}

// One row of CI (3 or 4) channel pixels into out_w pixels of CO (CI, or 3 from 4). Reads 4 bytes
// per source pixel: for CI == 3 one byte past the row's last pixel, which must be readable.
template <int CI, int CO>
void row_neon(const uint8_t* in, const AxisWeights& kn, const NeonHPlan& p, uint8_t* out, int out_w) {
    const int taps = kn.taps;
    for (int x = 0; x < out_w; ++x) {
        const uint8_t* px = in + int64_t(kn.start[x]) * CI;
        const int16_t* wh = &p.hi[size_t(x) * taps];
        const int16_t* wl = &p.lo[size_t(x) * taps];
        int32x4_t sh = vdupq_n_s32(0), sl = vdupq_n_s32(0);
        for (int j = 0; j < taps; ++j) {
            const int16x4_t v = load_pixel(px + j * CI);
            sh = vmlal_n_s16(sh, v, wh[j]);
            sl = vmlal_n_s16(sl, v, wl[j]);
        }
        const uint32_t r = vget_lane_u32(vreinterpret_u32_u8(finish4(sh, sl)), 0);
        if (CO == 4 || x + 1 < out_w) {
            std::memcpy(out + x * CO, &r, 4);  // for CO == 3 the 4th byte is rewritten next
        } else {
            std::memcpy(out + x * CO, &r, 3);
        }
    }
}

// out[x] for x from 0 up to the value returned (a multiple of 16, at most len; 0 when a weight
// does not split or there are more than kMaxTaps taps): the caller does the rest.
int vertical_steps(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    constexpr int kMaxTaps = 128;
    if (taps > kMaxTaps || len < 16) return 0;
    int16_t whi[kMaxTaps], wlo[kMaxTaps];
    for (int j = 0; j < taps; ++j)
        if (!split_weight(k[j], wlo[j], whi[j])) return 0;
    int x = 0;
    for (; x + 16 <= len; x += 16) {
        // Accumulators: byte groups 0-3, 4-7, 8-11, 12-15, each as hi and lo sums.
        int32x4_t sh[4], sl[4];
        for (int g = 0; g < 4; ++g) sh[g] = sl[g] = vdupq_n_s32(0);
        for (int j = 0; j < taps; ++j) {
            const uint8x16_t b = vld1q_u8(first + j * stride + x);
            const int16x8_t a0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b)));
            const int16x8_t a1 = vreinterpretq_s16_u16(vmovl_high_u8(b));
            const int16x4_t v[4] = {vget_low_s16(a0), vget_high_s16(a0), vget_low_s16(a1), vget_high_s16(a1)};
            for (int g = 0; g < 4; ++g) {
                sh[g] = vmlal_n_s16(sh[g], v[g], whi[j]);
                sl[g] = vmlal_n_s16(sl[g], v[g], wlo[j]);
            }
        }
        int32x4_t r[4];
        for (int g = 0; g < 4; ++g)
            r[g] = vshrq_n_s32(vaddq_s32(vaddq_s32(vshlq_n_s32(sh[g], kSplitBits), sl[g]), vdupq_n_s32(kHalf)),
                               kPrecisionBits);
        // clip8's clamp is the two saturating narrowings.
        const int16x8_t r01 = vcombine_s16(vqmovn_s32(r[0]), vqmovn_s32(r[1]));
        const int16x8_t r23 = vcombine_s16(vqmovn_s32(r[2]), vqmovn_s32(r[3]));
        vst1q_u8(out + x, vcombine_u8(vqmovun_s16(r01), vqmovun_s16(r23)));
    }
    return x;
}

}  // namespace

// 16-byte NEON steps (smlal on split weights), the portable loop for the rest.
void vertical_row_neon(const uint8_t* first, int64_t stride, const int32_t* k, int taps, uint8_t* out, int len) {
    const int done = vertical_steps(first, stride, k, taps, out, len);
    if (done < len) vertical_row_body(first + done, stride, k, taps, out + done, len - done);
}

std::unique_ptr<HorizontalPlan> horizontal_plan_neon(const AxisWeights& kn, int, int out_w, int C, int) {
    if (C < 3) return nullptr;
    auto p = std::make_unique<NeonHPlan>();
    const size_t n = size_t(out_w) * kn.taps;
    p->hi.resize(n);
    p->lo.resize(n);
    for (size_t i = 0; i < n; ++i)
        if (!split_weight(kn.weights[i], p->lo[i], p->hi[i])) return nullptr;
    return p;
}

void horizontal_rows_neon(const HorizontalPlan& plan, const AxisWeights& kn, const ImageView& src, int row0, int64_t y0,
                          int64_t y1, uint8_t* out, int64_t out_stride, int out_w, int CO) {
    const NeonHPlan& p = static_cast<const NeonHPlan&>(plan);
    const int CI = src.channels;
    each_row(src, row0, y0, y1, out, out_stride, CI == 3, [&](const uint8_t* in, uint8_t* o) {
        if (CI == 3) {
            row_neon<3, 3>(in, kn, p, o, out_w);
        } else if (CO == 3) {
            row_neon<4, 3>(in, kn, p, o, out_w);
        } else {
            row_neon<4, 4>(in, kn, p, o, out_w);
        }
    });
}

}  // namespace smg

#endif
