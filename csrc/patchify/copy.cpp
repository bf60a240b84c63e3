#include "patchify/copy.hpp"

#include <algorithm>
#include <cstring>

#include "scratch.hpp"

namespace smg {

namespace {

// Splits `width` pixels of one interleaved row into three planes (a fixed channel stride, which
// the compiler vectorizes).
template <int C>
void deinterleave(const uint8_t* src, int width, uint8_t* r, uint8_t* g, uint8_t* b) {
    for (int x = 0; x < width; ++x) {
        r[x] = src[x * C];
        g[x] = src[x * C + 1];
        b[x] = src[x * C + 2];
    }
}

// Copies the block row's patches out of the planes; kP > 0 fixes the patch side at compile time
// (P = 14 and 16: the copies become a few moves instead of library calls).
template <int kP>
void copy_patches(const uint8_t* planes, int64_t plane, int W, const PatchLayout& L, uint8_t* dst, int bh) {
    const int P = kP > 0 ? kP : L.patch, m = L.merge, Tn = L.temporal;
    const int64_t pp = int64_t(P) * P, row_elems = patch_row_elems(L);
    const int blocks_w = L.grid_w / m;
    for (int bw = 0; bw < blocks_w; ++bw) {
        for (int mh = 0; mh < m; ++mh) {
            for (int mw = 0; mw < m; ++mw) {
                const int64_t r = ((int64_t(bh) * blocks_w + bw) * m + mh) * m + mw;
                uint8_t* out = dst + r * row_elems;
                const int x0 = (bw * m + mw) * P;
                for (int c = 0; c < 3; ++c) {
                    uint8_t* o = out + int64_t(c) * Tn * pp;
                    const uint8_t* src = planes + c * plane + int64_t(mh) * P * W + x0;
                    for (int py = 0; py < P; ++py) std::memcpy(o + py * P, src + int64_t(py) * W, size_t(P));
                    for (int t = 1; t < Tn; ++t) std::memcpy(o + t * pp, o, size_t(pp));
                }
            }
        }
    }
}

}  // namespace

void block_row_u8(const ImageView& band, const PatchLayout& L, uint8_t* dst, int bh) {
    const int P = L.patch, rows = L.merge * P, W = L.grid_w * P;  // the block row, padding included
    const int64_t plane = int64_t(rows) * W;
    // Channel planes of the block row: every patch row then reads P contiguous bytes per line.
    ScratchBuffer buf(size_t(3 * plane));
    uint8_t* planes = buf.as<uint8_t>();
    const int width = std::min(band.width, W);
    for (int y = 0; y < rows; ++y) {
        uint8_t* r = planes + int64_t(y) * W;
        uint8_t* g = r + plane;
        uint8_t* b = g + plane;
        int valid = 0;
        if (y < band.height) {
            const uint8_t* src = band.data + int64_t(y) * band.stride;
            if (band.channels == 4)
                deinterleave<4>(src, width, r, g, b);
            else
                deinterleave<3>(src, width, r, g, b);
            valid = width;
        }
        for (uint8_t* p : {r, g, b}) std::memset(p + valid, 0, size_t(W - valid));
    }
    switch (P) {
        case 14: copy_patches<14>(planes, plane, W, L, dst, bh); break;
        case 16: copy_patches<16>(planes, plane, W, L, dst, bh); break;
        default: copy_patches<0>(planes, plane, W, L, dst, bh); break;
    }
}

}  // namespace smg
