#include "patchify/channels_last.hpp"

#include <algorithm>
#include <cstdint>

namespace smg {

namespace {

// One patch line: n pixels of C bytes (C = 3 or 4) through the three channel tables, then
// pixel 0 up to P pixels.
template <typename T, int C>
void line(const uint8_t* src, int n, int P, const T* lut, T* o) {
    const T* lr = lut;
    const T* lg = lut + 256;
    const T* lb = lut + 512;
    for (int x = 0; x < n; ++x, src += C, o += 3) {
        o[0] = lr[src[0]];
        o[1] = lg[src[1]];
        o[2] = lb[src[2]];
    }
    for (int x = n; x < P; ++x, o += 3) {
        o[0] = lr[0];
        o[1] = lg[0];
        o[2] = lb[0];
    }
}

template <typename T>
void rows(const ImageView& band, const PatchLayout& L, const T* lut, T* dst, int bh) {
    const int P = L.patch;
    const int64_t row_elems = patch_row_elems(L);
    for (int gx = 0; gx < L.grid_w; ++gx) {
        T* out = dst + (int64_t(bh) * L.grid_w + gx) * row_elems;
        const int x0 = gx * P;
        const int valid_x = std::max(0, std::min(P, band.width - x0));
        for (int py = 0; py < P; ++py) {
            const int n = py < band.height ? valid_x : 0;
            const uint8_t* src = band.data + int64_t(std::min(py, std::max(band.height - 1, 0))) * band.stride +
                                 int64_t(x0) * band.channels;
            T* o = out + int64_t(py) * P * 3;
            if (band.channels == 4)
                line<T, 4>(src, n, P, lut, o);
            else
                line<T, 3>(src, n, P, lut, o);
        }
    }
}

}  // namespace

void block_row_channels_last(const ImageView& band, const PatchLayout& L, DType dt, const void* lut, void* dst,
                             int bh) {
    switch (dt) {
        case DType::Float32: rows<float>(band, L, static_cast<const float*>(lut), static_cast<float*>(dst), bh); break;
        case DType::UInt8:
            rows<uint8_t>(band, L, static_cast<const uint8_t*>(lut), static_cast<uint8_t*>(dst), bh);
            break;
        default: rows<uint16_t>(band, L, static_cast<const uint16_t*>(lut), static_cast<uint16_t*>(dst), bh); break;
    }
}

}  // namespace smg
