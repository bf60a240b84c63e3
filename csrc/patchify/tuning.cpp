#include "patchify/tuning.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#if SMG_X86
#include <emmintrin.h>
#endif

#include "patchify/channels_last.hpp"
#include "tune.hpp"

namespace smg {

namespace {

constexpr int kJobWidth = 448;  // pixels per row of the timing job (a small image's width)
constexpr int kJobBlockRows = 2;

const char* dtype_name(DType dt) {
    switch (dt) {
        case DType::Float32: return "float32";
        case DType::BFloat16: return "bfloat16";
        case DType::Float16: return "float16";
        default: return "uint8";
    }
}

// Writes back and evicts n bytes at p from every cache level: a processor's output is mostly
// memory the caches do not hold, and the kernels' stores differ most in how they meet such lines
// (on Zen 5 the AVX-512 kernel's masked stores of 14-pixel rows into uncached lines cost it about
// twice the AVX2 kernel's time, while it is the faster one into cached lines). Elsewhere a no-op.
void evict(const void* p, size_t n) {
#if SMG_X86
    const char* c = static_cast<const char*>(p);
    for (size_t o = 0; o < n; o += 64) _mm_clflush(c + o);
    _mm_mfence();
#else
    (void)p;
    (void)n;
#endif
}

// The timing job's output, in 4 KiB pages only: malloc can hand back memory that a scratch block
// advised for huge pages, into which the kernels' stores ran up to twice as fast as into the
// processor's outputs (the table kernel then won the timing and lost the run).
class JobOutput {
public:
    ~JobOutput() { std::free(p_); }
    void make(size_t n) {
        const size_t cap = (n + 4095) / 4096 * 4096;
        if (posix_memalign(reinterpret_cast<void**>(&p_), 4096, cap) != 0) throw std::bad_alloc();
#ifdef MADV_NOHUGEPAGE
        madvise(p_, cap, MADV_NOHUGEPAGE);
#endif
        std::memset(p_, 0, cap);
        n_ = n;
    }
    uint8_t* data() const { return p_; }
    size_t size() const { return n_; }
    bool empty() const { return p_ == nullptr; }

private:
    uint8_t* p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace

size_t tune_patchify(const std::vector<PatchifyChoice>& candidates, DType dt, const void* lut, int patch, int merge,
                     int temporal, PatchOrder order) {
    std::string key = std::string(dtype_name(dt)) + " P" + std::to_string(patch) + " m" + std::to_string(merge) + " T" +
                      std::to_string(temporal) +
                      (order == PatchOrder::ChannelLast ? " channel-last:" : " channel-first:");
    std::vector<std::string> names;
    for (const PatchifyChoice& c : candidates) {
        key += std::string(" ") + c.prep->label;
        names.emplace_back(c.kernel->name);
    }
    // The job: kJobBlockRows merged block rows of an image about kJobWidth pixels wide, random
    // pixels (in cache, as the Pipeline's band is), every patch inside the image, written into
    // uncached memory.
    const int cells = (kJobWidth + patch - 1) / patch;
    const int gw = (cells + merge - 1) / merge * merge;
    const PatchLayout L{patch, merge, temporal, kJobBlockRows * merge, gw};
    const int band_rows = merge * patch;
    const int64_t stride = int64_t(gw) * patch * 3;
    // Every block row's band, and one row more than read with slack (as the Pipeline's band); made
    // only if the class is timed (reset() runs first), not on the lookups that follow.
    std::vector<uint8_t> pixels;
    JobOutput dst;
    const auto make_job = [&] {
        pixels.resize(size_t(stride) * band_rows * kJobBlockRows + 64);
        uint32_t s = 0x9e3779b9u;
        for (uint8_t& p : pixels) {
            s = s * 1664525u + 1013904223u;
            p = uint8_t(s >> 24);
        }
        dst.make(size_t(L.grid_h) * size_t(gw) * size_t(patch_row_elems(L)) * size_t(dtype_size(dt)));
    };
    const auto run = [&](size_t i) {
        const PatchifyChoice& c = candidates[i];
        for (int bh = 0; bh < kJobBlockRows; ++bh) {
            const ImageView band{pixels.data() + int64_t(bh) * band_rows * stride, gw * patch, band_rows, 3, stride};
            if (order == PatchOrder::ChannelLast) {
                if (c.kernel->fn.channels_last)
                    c.kernel->fn.channels_last(band, L, *c.prep, dt, lut, dst.data(), bh);
                else
                    block_row_channels_last(band, L, dt, lut, dst.data(), bh);
            } else {
                c.kernel->fn.block_row(band, L, *c.prep, dt, lut, dst.data(), bh);
            }
        }
    };
    const auto reset = [&] {
        if (dst.empty()) make_job();
        evict(dst.data(), dst.size());
    };
    return tune_once(Stage::Patchify, key, names, reset, run);
}

}  // namespace smg
