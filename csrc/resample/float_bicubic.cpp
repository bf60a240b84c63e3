// torch's float32 bicubic interpolation without antialias (see float_bicubic.hpp).
#include "resample/float_bicubic.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu.hpp"
#include "fp_env.hpp"

namespace smg {

namespace {

// One axis: per output index the 4 source offsets (in elements of the tiled layout) and weights.
struct Taps {
    std::vector<int64_t> offset;
    std::vector<float> weight;
};

// Keys' cubic for |x| < 1 and for 1 <= |x| < 2 with a = -0.75, in the steps torch's build
// computes them: the inner steps fused, the last product rounded before its constant is added.
inline float near_weight(float x) {
    const float p = std::fma(1.25f, x, -2.25f);
    return p * x * x + 1.0f;
}

inline float far_weight(float x) {
    float p = std::fma(-0.75f, x, 3.75f);
    p = std::fma(p, x, -6.0f);
    return p * x + 3.0f;
}

// Offsets of source index k (clamped to the side) are tile_of(k) * tile_stride + (k % tile) * step.
Taps make_taps(int in_size, int out_size, int tile, int64_t tile_stride, int64_t step) {
    Taps t;
    t.offset.resize(size_t(out_size) * 4);
    t.weight.resize(size_t(out_size) * 4);
    const float scale = float(in_size) / float(out_size);
    for (int i = 0; i < out_size; ++i) {
        const float src = std::fma(scale, float(i) + 0.5f, -0.5f);
        const int64_t index = std::min(int64_t(std::floor(src)), int64_t(in_size) - 1);
        const float lambda = std::min(std::max(src - float(index), 0.0f), 1.0f);
        const float x2 = 1.0f - lambda;
        const float w[4] = {far_weight(lambda + 1.0f), near_weight(lambda), near_weight(x2), far_weight(x2 + 1.0f)};
        for (int j = 0; j < 4; ++j) {
            const int64_t k = std::max<int64_t>(std::min<int64_t>(index - 1 + j, in_size - 1), 0);
            t.offset[size_t(i) * 4 + j] = (k / tile) * tile_stride + (k % tile) * step;
            t.weight[size_t(i) * 4 + j] = w[j];
        }
    }
    return t;
}

// The sum torch forms over 4 taps: t0 * w0 fused into t1 * w1, then two fused multiply-adds.
__attribute__((always_inline)) inline float sum4(const float* v, const float* w) {
    float s = std::fma(v[0], w[0], v[1] * w[1]);
    s = std::fma(v[2], w[2], s);
    return std::fma(v[3], w[3], s);
}

__attribute__((always_inline)) inline void resize_plane(const float* plane, const Taps& ty, const Taps& tx, float* dst,
                                                        int out_h, int out_w) {
    for (int y = 0; y < out_h; ++y) {
        const int64_t* oy = &ty.offset[size_t(y) * 4];
        const float* wy = &ty.weight[size_t(y) * 4];
        float* row = dst + int64_t(y) * out_w;
        for (int x = 0; x < out_w; ++x) {
            const int64_t* ox = &tx.offset[size_t(x) * 4];
            const float* wx = &tx.weight[size_t(x) * 4];
            float h[4];
            for (int j = 0; j < 4; ++j) {
                const float* r = plane + oy[j];
                const float v[4] = {r[ox[0]], r[ox[1]], r[ox[2]], r[ox[3]]};
                h[j] = sum4(v, wx);
            }
            row[x] = sum4(h, wy);
        }
    }
}

void resize_planes(const TiledCanvas& src, const Taps& ty, const Taps& tx, float* dst, int out_h, int out_w) {
    const int64_t plane = int64_t(src.tile_h) * src.tile_w;
    for (int c = 0; c < src.channels; ++c)
        resize_plane(src.data + c * plane, ty, tx, dst + int64_t(c) * out_h * out_w, out_h, out_w);
}

#if SMG_X86
// The same with the FMA instructions inline (std::fma is a library call without them).
__attribute__((target("fma"))) void resize_planes_fma(const TiledCanvas& src, const Taps& ty, const Taps& tx,
                                                      float* dst, int out_h, int out_w) {
    const int64_t plane = int64_t(src.tile_h) * src.tile_w;
    for (int c = 0; c < src.channels; ++c)
        resize_plane(src.data + c * plane, ty, tx, dst + int64_t(c) * out_h * out_w, out_h, out_w);
}
#endif

}  // namespace

void torch_bicubic_float(const TiledCanvas& src, float* dst, int out_h, int out_w) {
    const DefaultFpEnv env;
    const int64_t tile_elems = int64_t(src.channels) * src.tile_h * src.tile_w;
    // a source row y starts at tile row y / tile_h, line y % tile_h; a column x in tile column
    // x / tile_w at x % tile_w
    const Taps ty = make_taps(src.rows * src.tile_h, out_h, src.tile_h, tile_elems * src.cols, src.tile_w);
    const Taps tx = make_taps(src.cols * src.tile_w, out_w, src.tile_w, tile_elems, 1);
#if SMG_X86
    if (host_isa().fma_f16c) {
        resize_planes_fma(src, ty, tx, dst, out_h, out_w);
        return;
    }
#endif
    resize_planes(src, ty, tx, dst, out_h, out_w);
}

}  // namespace smg
