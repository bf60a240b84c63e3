#include "normalize/expand.hpp"

#include <algorithm>

#include "parallel.hpp"

namespace smg {

namespace {

constexpr int64_t kGrain = int64_t(1) << 16;  // elements per parallel chunk

template <class T>
void expand_range(const uint8_t* codes, int64_t begin, int64_t end, int64_t run, const T* lut, T* out) {
    int64_t i = begin;
    while (i < end) {
        const int64_t r = i / run;
        const T* table = lut + (r % 3) * 256;
        const int64_t stop = std::min(end, (r + 1) * run);
        const uint8_t* c = codes + i;
        T* o = out + i;
        const int64_t len = stop - i;
        int64_t j = 0;
        for (; j + 4 <= len; j += 4) {
            const T a = table[c[j]], b = table[c[j + 1]], d = table[c[j + 2]], e = table[c[j + 3]];
            o[j] = a;
            o[j + 1] = b;
            o[j + 2] = d;
            o[j + 3] = e;
        }
        for (; j < len; ++j) o[j] = table[c[j]];
        i = stop;
    }
}

template <class T>
void expand_typed(const uint8_t* codes, int64_t n, int64_t run, const T* lut, T* out) {
    const int64_t chunks = (n + kGrain - 1) / kGrain;
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        expand_range(codes, b * kGrain, std::min(n, e * kGrain), run, lut, out);
    });
}

}  // namespace

void expand_lut(const uint8_t* codes, int64_t n, int64_t run, const void* lut, int elem_size, void* out) {
    if (elem_size == 4)
        expand_typed(codes, n, run, static_cast<const uint32_t*>(lut), static_cast<uint32_t*>(out));
    else
        expand_typed(codes, n, run, static_cast<const uint16_t*>(lut), static_cast<uint16_t*>(out));
}

}  // namespace smg
