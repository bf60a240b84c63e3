#include "patchify.hpp"

#include <algorithm>
#include <cstring>

#include "cpu.hpp"
#include "parallel.hpp"

namespace smg {

namespace {

// One patch row (py) of one channel: P values from the image row (or padding), then T copies.
template <typename T>
SMG_CLONES void patch_line(const uint8_t* src, int valid, const T* lut, T* out, int P, int reps,
                           int64_t rep_stride) {
    T tmp[64];
    const T pad = lut[0];
    for (int px = 0; px < valid; ++px) tmp[px] = lut[src[px * 3]];
    for (int px = valid; px < P; ++px) tmp[px] = pad;
    for (int t = 0; t < reps; ++t) std::memcpy(out + t * rep_stride, tmp, sizeof(T) * P);
}

template <typename T>
void patchify_typed(const ImageView& img, const PatchLayout& L, const T* lut, T* dst) {
    const int P = L.patch, m = L.merge, Tn = L.temporal;
    const int64_t row_elems = patch_row_elems(L);
    const int64_t pp = int64_t(P) * P;
    const int block_rows = L.grid_h / m;  // one band = m rows of patches
    const int blocks_w = L.grid_w / m;
    parallel_for(block_rows, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh) {
            for (int bw = 0; bw < blocks_w; ++bw) {
                for (int mh = 0; mh < m; ++mh) {
                    for (int mw = 0; mw < m; ++mw) {
                        const int64_t r = ((bh * blocks_w + bw) * m + mh) * m + mw;
                        T* out = dst + r * row_elems;
                        const int y0 = int(bh * m + mh) * P;
                        const int x0 = (bw * m + mw) * P;
                        const int valid_x = std::max(0, std::min(P, img.width - x0));
                        for (int c = 0; c < 3; ++c) {
                            const T* lc = lut + c * 256;
                            T* oc = out + int64_t(c) * Tn * pp;
                            for (int py = 0; py < P; ++py) {
                                const int y = y0 + py;
                                const int vx = y < img.height ? valid_x : 0;
                                const uint8_t* src = img.data + int64_t(std::min(y, img.height - 1)) * img.stride +
                                                     int64_t(x0) * 3 + c;
                                patch_line<T>(src, vx, lc, oc + py * P, P, Tn, pp);
                            }
                        }
                    }
                }
            }
        }
    });
}

}  // namespace

void patchify(const ImageView& img, const PatchLayout& L, DType dtype, const void* lut, void* dst) {
    if (dtype == DType::Float32) {
        patchify_typed<float>(img, L, static_cast<const float*>(lut), static_cast<float*>(dst));
    } else {
        patchify_typed<uint16_t>(img, L, static_cast<const uint16_t*>(lut), static_cast<uint16_t*>(dst));
    }
}

}  // namespace smg
