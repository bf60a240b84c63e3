// The portable expansion kernel: one table lookup per element.
#include "expand/kernels.hpp"

namespace smg {

namespace {

template <class T>
void expand_scalar(const uint8_t* c, int64_t len, const T* table, T* o) {
    int64_t j = 0;
    for (; j + 4 <= len; j += 4) {
        const T a = table[c[j]], b = table[c[j + 1]], d = table[c[j + 2]], e = table[c[j + 3]];
        o[j] = a;
        o[j + 1] = b;
        o[j + 2] = d;
        o[j + 3] = e;
    }
    for (; j < len; ++j) o[j] = table[c[j]];
}

}  // namespace

void expand16_scalar(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out) {
    expand_scalar(codes, len, static_cast<const uint16_t*>(t.values), out);
}

void expand32_scalar(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out) {
    expand_scalar(codes, len, static_cast<const uint32_t*>(t.values), out);
}

}  // namespace smg
