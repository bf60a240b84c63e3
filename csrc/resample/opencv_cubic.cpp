// OpenCV's INTER_CUBIC float resize (opencv_cubic.hpp): tap tables, the two passes, row bands.
#include "resample/opencv_cubic.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "parallel.hpp"

namespace smg {

namespace {

constexpr float kA = -0.75f;  // OpenCV's cubic parameter

// The four weights of Keys' cubic at fraction x in [0, 1), each polynomial in OpenCV's evaluation
// order (Horner form, float), the last one 1 minus the other three.
void cubic_weights(float x, float* w) {
    const float left = x + 1.f, right = 1.f - x;
    w[0] = ((kA * left - 5.f * kA) * left + 8.f * kA) * left - 4.f * kA;
    w[1] = ((kA + 2.f) * x - (kA + 3.f)) * x * x + 1.f;
    w[2] = ((kA + 2.f) * right - (kA + 3.f)) * right * right + 1.f;
    w[3] = 1.f - w[0] - w[1] - w[2];
}

// Per output position d along one axis: the source index of tap 1 and the four weights.
struct Taps {
    std::vector<int> center;
    std::vector<float> weights;  // 4 per position
};

Taps axis_taps(int in, int out) {
    Taps t;
    t.center.resize(size_t(out));
    t.weights.resize(size_t(out) * 4);
    const double scale = 1.0 / (double(out) / double(in));
    for (int d = 0; d < out; ++d) {
        float f = float((d + 0.5) * scale - 0.5);
        const int s = int(std::floor(f));
        f -= float(s);
        t.center[size_t(d)] = s;
        cubic_weights(f, &t.weights[size_t(d) * 4]);
    }
    return t;
}

inline int clamp_index(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// One source row filtered horizontally into dst (out_w * channels floats). Positions whose taps
// leave the row sum from zero over edge-clamped taps, as OpenCV's border loop does; the others
// sum the four products directly.
template <typename T>
void horizontal(const T* row, int width, int cn, int ps, const Taps& tx, int out_w, float* dst) {
    for (int x = 0; x < out_w; ++x) {
        const int s = tx.center[size_t(x)];
        const float* w = &tx.weights[size_t(x) * 4];
        float* o = dst + int64_t(x) * cn;
        if (s < 1 || s + 2 >= width) {
            int idx[4];
            for (int j = 0; j < 4; ++j) idx[j] = clamp_index(s - 1 + j, width) * ps;
            for (int c = 0; c < cn; ++c) {
                float v = 0.f;
                for (int j = 0; j < 4; ++j) v += float(row[idx[j] + c]) * w[j];
                o[c] = v;
            }
        } else {
            const T* p = row + int64_t(s - 1) * ps;
            for (int c = 0; c < cn; ++c)
                o[c] = float(p[c]) * w[0] + float(p[ps + c]) * w[1] + float(p[2 * ps + c]) * w[2] +
                       float(p[3 * ps + c]) * w[3];
        }
    }
}

// One output row from four filtered rows. OpenCV's vector loop (four floats a step at its SSE
// baseline) sums tap 3 first: ((r3 b3 + r2 b2) + r1 b1) + r0 b0, each product and sum rounded
// (its multiply-add is a multiply then an add there); the n % 4 values past it take the scalar
// loop, tap 0 first.
void vertical(const float* const* r, const float* b, int64_t n, float* line) {
    const int64_t vec_end = n - n % 4;
    int64_t i = 0;
    for (; i < vec_end; ++i) line[i] = r[3][i] * b[3] + r[2][i] * b[2] + r[1][i] * b[1] + r[0][i] * b[0];
    for (; i < n; ++i) line[i] = r[0][i] * b[0] + r[1][i] * b[1] + r[2][i] * b[2] + r[3][i] * b[3];
}

// A finished output row (n = out_w * channels floats, packed) stored packed, or normalized and
// channel-first.
void store_row(const float* v, int y, int out_w, int out_h, int cn, float* out, const CubicNormalize* norm) {
    const int64_t n = int64_t(out_w) * cn;
    if (!norm) {
        std::memcpy(out + int64_t(y) * n, v, size_t(n) * sizeof(float));
        return;
    }
    const int64_t plane = int64_t(out_w) * out_h;
    for (int c = 0; c < cn; ++c) {
        float* o = out + c * plane + int64_t(y) * out_w;
        const float mean = norm->mean[c], sd = norm->std[c];
        for (int x = 0; x < out_w; ++x) o[x] = (v[int64_t(x) * cn + c] / 255.f - mean) / sd;
    }
}

template <typename T>
const T* source_row(const CubicSource& src, int y);
template <>
const float* source_row<float>(const CubicSource& src, int y) {
    return src.f32 + int64_t(y) * src.row_stride;
}
template <>
const uint8_t* source_row<uint8_t>(const CubicSource& src, int y) {
    return src.u8 + int64_t(y) * src.row_stride;
}

// Output rows [y0, y1): each reads four horizontally filtered source rows, kept in four slots so
// that a row shared by neighbouring outputs is filtered once.
template <typename T>
void band(const CubicSource& src, const Taps& tx, const Taps& ty, int out_w, int out_h, int y0, int y1, float* out,
          const CubicNormalize* norm) {
    const int cn = src.channels;
    const int64_t n = int64_t(out_w) * cn;
    std::vector<float> slots(size_t(n) * 5);
    float* rows[4];
    int held[4] = {-1, -1, -1, -1};
    for (int k = 0; k < 4; ++k) rows[k] = slots.data() + k * n;
    float* line = slots.data() + 4 * n;
    for (int y = y0; y < y1; ++y) {
        const int s = ty.center[size_t(y)];
        const float* b = &ty.weights[size_t(y) * 4];
        const float* r[4];
        int want[4];
        for (int k = 0; k < 4; ++k) want[k] = clamp_index(s - 1 + k, src.height);
        bool used[4] = {false, false, false, false};
        for (int k = 0; k < 4; ++k) {  // rows already filtered
            r[k] = nullptr;
            for (int j = 0; j < 4; ++j)
                if (held[j] == want[k]) {
                    r[k] = rows[j];
                    used[j] = true;
                    break;
                }
        }
        for (int k = 0; k < 4; ++k) {  // the rest, into slots this output does not read
            if (r[k]) continue;
            int j = 0;
            while (used[j]) ++j;
            horizontal(source_row<T>(src, want[k]), src.width, cn, src.pixel_stride, tx, out_w, rows[j]);
            held[j] = want[k];
            used[j] = true;
            r[k] = rows[j];
            for (int m = k + 1; m < 4; ++m)
                if (want[m] == want[k]) r[m] = rows[j];
        }
        vertical(r, b, n, line);
        store_row(line, y, out_w, out_h, cn, out, norm);
    }
}

// A same-size resize: cv::resize copies the source.
template <typename T>
void copy_rows(const CubicSource& src, float* out, const CubicNormalize* norm) {
    const int64_t n = int64_t(src.width) * src.channels;
    std::vector<float> line(static_cast<size_t>(n));
    for (int y = 0; y < src.height; ++y) {
        const T* row = source_row<T>(src, y);
        for (int x = 0; x < src.width; ++x)
            for (int c = 0; c < src.channels; ++c)
                line[size_t(x) * src.channels + c] = float(row[int64_t(x) * src.pixel_stride + c]);
        store_row(line.data(), y, src.width, src.height, src.channels, out, norm);
    }
}

template <typename T>
void run(const CubicSource& src, int out_w, int out_h, float* out, const CubicNormalize* norm) {
    if (out_w == src.width && out_h == src.height) {
        copy_rows<T>(src, out, norm);
        return;
    }
    const Taps tx = axis_taps(src.width, out_w);
    const Taps ty = axis_taps(src.height, out_h);
    const int64_t grain = std::max<int64_t>(8, int64_t(1 << 16) / std::max<int64_t>(1, int64_t(out_w) * src.channels));
    parallel_for(out_h, grain,
                 [&](int64_t y0, int64_t y1) { band<T>(src, tx, ty, out_w, out_h, int(y0), int(y1), out, norm); });
}

}  // namespace

void opencv_cubic_resize(const CubicSource& src, int out_w, int out_h, float* out, const CubicNormalize* norm) {
    if (src.u8)
        run<uint8_t>(src, out_w, out_h, out, norm);
    else
        run<float>(src, out_w, out_h, out, norm);
}

}  // namespace smg
