#include "resample/nearest.hpp"

#include <cstring>

namespace smg {

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
