#include "expand/expand.hpp"

#include <algorithm>
#include <iterator>

#include "dispatch.hpp"
#include "parallel.hpp"

namespace smg {

namespace {

constexpr int64_t kGrain = int64_t(1) << 16;  // elements per parallel chunk
// Runs shorter than this (Gemma 4's channel-last patches: 1) are looked up element by element in
// one loop: a kernel call per run costs more than the run's lookups.
constexpr int64_t kShortRun = 16;

// The three channels' byte planes (ExpandChannel), made once per call.
struct Tables {
    alignas(64) uint8_t planes[3][4][256];
};

template <class T>
void build_planes(const T* lut, Tables& t) {
    for (int ch = 0; ch < 3; ++ch)
        for (int v = 0; v < 256; ++v) {
            const T x = lut[ch * 256 + v];
            for (size_t b = 0; b < sizeof(T); ++b) t.planes[ch][b][v] = uint8_t(x >> (8 * b));
        }
}

// out[i] for i in [i, end): the table follows the runs as they pass.
template <class T>
void short_runs(const uint8_t* codes, int64_t i, int64_t end, int64_t run, const T* lut, T* out) {
    const int64_t r = i / run;
    int64_t left = (r + 1) * run - i;  // codes left in run r
    int ch = int(r % 3);
    const T* table = lut + ch * 256;
    for (; i < end; ++i) {
        out[i] = table[codes[i]];
        if (--left == 0) {
            left = run;
            ch = ch == 2 ? 0 : ch + 1;
            table = lut + ch * 256;
        }
    }
}

// Runs of 1 (channel-last patches): channels 0, 1, 2 in turn, three lookups a step with no
// per-element channel test; short_runs takes the codes before the first channel-0 one and the
// last incomplete step.
template <class T>
void single_runs(const uint8_t* codes, int64_t i, int64_t end, const T* lut, T* out) {
    const int64_t first = std::min(end, (i + 2) / 3 * 3);
    short_runs(codes, i, first, 1, lut, out);
    for (i = first; i + 3 <= end; i += 3) {
        const T a = lut[codes[i]], b = lut[256 + codes[i + 1]], c = lut[512 + codes[i + 2]];
        out[i] = a;
        out[i + 1] = b;
        out[i + 2] = c;
    }
    short_runs(codes, i, end, 1, lut, out);
}

template <class T>
void expand_typed(void (*fn)(const uint8_t*, int64_t, const ExpandChannel&, T*), bool planes, const uint8_t* codes,
                  int64_t n, int64_t run, const T* lut, T* out) {
    const int64_t chunks = (n + kGrain - 1) / kGrain;
    if (run < kShortRun) {
        parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
            if (run == 1)
                single_runs(codes, b * kGrain, std::min(n, e * kGrain), lut, out);
            else
                short_runs(codes, b * kGrain, std::min(n, e * kGrain), run, lut, out);
        });
        return;
    }
    Tables t;
    if (planes) build_planes(lut, t);
    const ExpandChannel chans[3] = {{lut, t.planes[0][0]}, {lut + 256, t.planes[1][0]}, {lut + 512, t.planes[2][0]}};
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        const int64_t end = std::min(n, e * kGrain);
        for (int64_t i = b * kGrain; i < end;) {  // a channel's run (or the part of it in the chunk) at a time
            const int64_t r = i / run;
            const int64_t stop = std::min(end, (r + 1) * run);
            fn(codes + i, stop - i, chans[r % 3], out + i);
            i = stop;
        }
    });
}

}  // namespace

void expand_lut_with(const ExpandKernel& k, const uint8_t* codes, int64_t n, int64_t run, const void* lut,
                     int elem_size, void* out) {
    if (elem_size == 4)
        expand_typed(k.run32, k.planes, codes, n, run, static_cast<const uint32_t*>(lut), static_cast<uint32_t*>(out));
    else
        expand_typed(k.run16, k.planes, codes, n, run, static_cast<const uint16_t*>(lut), static_cast<uint16_t*>(out));
}

void expand_lut(const uint8_t* codes, int64_t n, int64_t run, const void* lut, int elem_size, void* out) {
    // Short runs take the portable loop whichever kernel is allowed (expand_typed).
    const KernelRow<ExpandKernel>& k =
        run < kShortRun ? kExpandKernels[std::size(kExpandKernels) - 1] : first_allowed(kExpandKernels);
    note_ran(Stage::Expand, k.id);
    expand_lut_with(k.fn, codes, n, run, lut, elem_size, out);
}

}  // namespace smg
