// The portable normalize + patchify kernel: each value looked up in the table itself, so it
// reproduces any normalization, on every architecture.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "patchify/kernels.hpp"

namespace smg {

namespace {

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

}  // namespace

bool patchify_prepare_table(const NormParams&, DType, const void*, PatchifyPrep& prep) {
    prep.label = "table";
    return true;
}

void patchify_table(const ImageView& band, const PatchLayout& L, const PatchifyPrep&, DType dt, const void* lut,
                    void* dst, int bh) {
    if (dt == DType::Float32) {
        block_row_scalar<float>(band, L, static_cast<const float*>(lut), static_cast<float*>(dst), bh);
    } else {
        block_row_scalar<uint16_t>(band, L, static_cast<const uint16_t*>(lut), static_cast<uint16_t*>(dst), bh);
    }
}

}  // namespace smg
