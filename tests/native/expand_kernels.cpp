// The SIMD expansion kernels against the scalar one, byte for byte, for 2- and 4-byte values with
// random tables: whole calls (runs of 1 to 1000 codes, the patch layouts' 392 and 588, sizes past
// one parallel chunk, so that chunks split runs) and single stretches of every length up to 200
// at every alignment of codes and values, each ending at an unmapped page.
#include <string>

#include "check.hpp"
#include "expand/expand.hpp"

namespace smg::native_test {

namespace {

void call_case(Rng& r, const KernelRow<ExpandKernel>& row, int es, int64_t run, int64_t runs) {
    const int64_t n = 3 * run * runs;
    std::vector<uint8_t> lut(size_t(3 * 256 * es));
    for (uint8_t& b : lut) b = r.byte();
    Guarded codes(size_t(n) + size_t(r.range(0, 63)));  // the codes start at any offset
    for (size_t i = 0; i < codes.size(); ++i) codes.data()[i] = r.byte();
    const uint8_t* c = codes.data() + (codes.size() - size_t(n));
    Guarded want(size_t(n * es)), got(size_t(n * es));
    expand_lut_with(kExpandKernels[std::size(kExpandKernels) - 1].fn, c, n, run, lut.data(), es, want.data());
    std::memset(got.data(), 0xA5, got.size());
    expand_lut_with(row.fn, c, n, run, lut.data(), es, got.data());
    tally("expand", row.name)
        .check(std::memcmp(want.data(), got.data(), got.size()) == 0,
               "elem " + std::to_string(es) + " run " + std::to_string(run) + " n " + std::to_string(n));
}

template <class T>
void stretch_case(Rng& r, const KernelRow<ExpandKernel>& row, int64_t len, int64_t shift) {
    alignas(64) uint8_t planes[4][256];
    T values[256];
    for (int v = 0; v < 256; ++v) {
        values[v] = T(r.next());
        for (size_t b = 0; b < sizeof(T); ++b) planes[b][v] = uint8_t(values[v] >> (8 * b));
    }
    const ExpandChannel ch{values, planes[0]};
    Guarded codes(size_t(len + shift));
    for (size_t i = 0; i < codes.size(); ++i) codes.data()[i] = r.byte();
    // The values end at the page; shift moves the codes' start against theirs.
    Guarded want(size_t(len) * sizeof(T)), got(size_t(len) * sizeof(T));
    std::memset(got.data(), 0xA5, got.size());
    auto run = [&](const ExpandKernel& k, uint8_t* dst) {
        if constexpr (sizeof(T) == 2)
            k.run16(codes.data() + shift, len, ch, reinterpret_cast<uint16_t*>(dst));
        else
            k.run32(codes.data() + shift, len, ch, reinterpret_cast<uint32_t*>(dst));
    };
    run(kExpandKernels[std::size(kExpandKernels) - 1].fn, want.data());
    run(row.fn, got.data());
    tally("expand", row.name)
        .check(std::memcmp(want.data(), got.data(), got.size()) == 0,
               "stretch of " + std::to_string(len) + " " + std::to_string(sizeof(T)) + "-byte values");
}

}  // namespace

void test_expand(uint64_t seed) {
    Rng r(seed);
    for (const auto* row : simd_rows(kExpandKernels)) {
        tally("expand", row->name);
        for (int es : {2, 4}) {
            for (int64_t run : {1, 2, 63, 64, 65, 127, 128, 129, 392, 588})
                for (int64_t runs : {1, 2, 5}) call_case(r, *row, es, run, runs);
            for (int i = 0; i < 20; ++i) call_case(r, *row, es, r.range(1, 1000), r.range(1, 7));
            call_case(r, *row, es, 588, 40);   // 70560 codes: a chunk boundary inside a run
            call_case(r, *row, es, 4096, 17);  // runs longer than a chunk
        }
        for (int64_t len = 0; len <= 200; ++len) {
            stretch_case<uint16_t>(r, *row, len, len % 64);
            stretch_case<uint32_t>(r, *row, len, (len * 7) % 64);
        }
    }
}

}  // namespace smg::native_test
