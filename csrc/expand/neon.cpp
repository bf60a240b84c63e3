// The NEON expansion kernel. A channel's 256-entry byte plane is four 64-byte tables: tbl looks 16
// codes up in the first, and tbx in each next one with the codes lowered by 64 (indexes past 63,
// which the wrap-around makes of every code below the table's range, keep what is there). st2 /
// st4 interleave the planes into the little-endian values as they store.
#include "expand/kernels.hpp"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace smg {

namespace {

struct Plane {
    uint8x16x4_t q[4];  // entries 0-63, 64-127, 128-191, 192-255
};

inline Plane load_plane(const uint8_t* p) {
    Plane t;
    for (int i = 0; i < 4; ++i) {
        const uint8_t* s = p + 64 * i;
        t.q[i] = {{vld1q_u8(s), vld1q_u8(s + 16), vld1q_u8(s + 32), vld1q_u8(s + 48)}};
    }
    return t;
}

inline uint8x16_t lookup(const Plane& t, uint8x16_t c) {
    const uint8x16_t k64 = vdupq_n_u8(64);
    uint8x16_t r = vqtbl4q_u8(t.q[0], c);
    uint8x16_t i = vsubq_u8(c, k64);
    r = vqtbx4q_u8(r, t.q[1], i);
    i = vsubq_u8(i, k64);
    r = vqtbx4q_u8(r, t.q[2], i);
    i = vsubq_u8(i, k64);
    return vqtbx4q_u8(r, t.q[3], i);
}

}  // namespace

// Whole steps of 16, then the last 16 codes again when there are that many (rewriting values
// already written with the same ones), else the portable kernel for the few.
void expand16_neon(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out) {
    if (len < 16) return expand16_scalar(codes, len, t, out);
    const Plane lo = load_plane(t.planes), hi = load_plane(t.planes + 256);
    auto step = [&](int64_t j) {
        const uint8x16_t c = vld1q_u8(codes + j);
        const uint8x16x2_t v = {{lookup(lo, c), lookup(hi, c)}};
        vst2q_u8(reinterpret_cast<uint8_t*>(out + j), v);
    };
    int64_t j = 0;
    for (; j + 16 <= len; j += 16) step(j);
    if (j < len) step(len - 16);
}

void expand32_neon(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out) {
    if (len < 16) return expand32_scalar(codes, len, t, out);
    const Plane p0 = load_plane(t.planes), p1 = load_plane(t.planes + 256);
    const Plane p2 = load_plane(t.planes + 512), p3 = load_plane(t.planes + 768);
    auto step = [&](int64_t j) {
        const uint8x16_t c = vld1q_u8(codes + j);
        const uint8x16x4_t v = {{lookup(p0, c), lookup(p1, c), lookup(p2, c), lookup(p3, c)}};
        vst4q_u8(reinterpret_cast<uint8_t*>(out + j), v);
    };
    int64_t j = 0;
    for (; j + 16 <= len; j += 16) step(j);
    if (j < len) step(len - 16);
}

}  // namespace smg

#endif  // __aarch64__
