// Kernel dispatch as data. Each stage has one table of the kernels compiled into this binary, best
// first: {id, name, arch, level, available, fn}. A stage runs the first row that this architecture,
// the SMG_FAST_ISA cap and the host CPU allow (and, where kernels take only some inputs, that takes
// the input; with tuning on, each stage runs the fastest such row per input class, timed once:
// tune.hpp);
// the last row of every table is portable C++ and always allowed. kernel_info() reports
// from the same tables what each stage selects and which kernels ran: results are identical under
// every kernel, so that log is the only proof that a test exercised the one it meant to.
//
// A new kernel is its instruction set's file in the stage's folder (its entry points declared in
// the stage's kernels.hpp), its row in the stage's table below, and its row in
// tests/numerics/test_isa_paths.py. A new instruction-set level is also a rung of its architecture's cap
// ladder (kX86Caps, kArm64Caps); a new host feature, a check in cpu.hpp and a row of kFeatures.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "cpu.hpp"
#include "expand/kernels.hpp"
#include "patchify/kernels.hpp"
#include "resample/kernels.hpp"

namespace smg {

// ---- caps: one ladder per architecture ----

enum class Arch : uint8_t {
    Any,    // portable C++, compiled everywhere
    X86,    // x86-64
    Arm64,  // aarch64
};

#if SMG_X86
inline constexpr Arch kArch = Arch::X86;
#elif defined(__aarch64__)
inline constexpr Arch kArch = Arch::Arm64;
#else
inline constexpr Arch kArch = Arch::Any;  // the portable kernels only
#endif

// The SMG_FAST_ISA values of each architecture, lowest first: a cap admits its own level (its index
// here) and every level below it. Level 0 is "baseline" everywhere: the portable kernels, plus on
// x86-64 the SSE2 ones (SSE2 is part of x86-64 itself). Unset (or "native") is the top of the
// ladder: whatever the CPU has. Any other value is baseline.
inline constexpr const char* kX86Caps[] = {"baseline", "avx2", "avx512-novnni", "avx512"};
inline constexpr const char* kArm64Caps[] = {"baseline"};
inline constexpr const char* kPortableCaps[] = {"baseline"};

inline constexpr int kBaseline = 0;
enum X86Level : int { kX86Avx2 = 1, kX86Avx512 = 2, kX86Avx512Vnni = 3 };  // indexes into kX86Caps

struct CapLadder {
    const char* const* names;
    int size;
};

constexpr CapLadder cap_ladder(Arch a) {
    switch (a) {
        case Arch::X86: return {kX86Caps, int(std::size(kX86Caps))};
        case Arch::Arm64: return {kArm64Caps, int(std::size(kArm64Caps))};
        default: return {kPortableCaps, int(std::size(kPortableCaps))};
    }
}

// SMG_FAST_ISA as set, or nullptr when unset or empty; read once, like the cap it sets.
const char* isa_cap_env();
// The cap in force: a level of this architecture's ladder.
int isa_cap();

// The instruction-set features kernel_info() and cpu_features() report: what the host has, and
// what the cap leaves usable (the host has it and the cap admits its level).
struct Feature {
    const char* name;
    Arch arch;
    int level;
    bool (*host)();
};

inline constexpr Feature kFeatures[] = {
    {"avx2", Arch::X86, kX86Avx2, host_avx2},
    {"avx512", Arch::X86, kX86Avx512, host_avx512},
    {"avx512vbmi", Arch::X86, kX86Avx512, host_avx512vbmi},
    {"avx512vnni", Arch::X86, kX86Avx512Vnni, host_avx512vnni},
};

inline bool always() { return true; }

// ---- the tables ----

template <class Fn>
struct KernelRow {
    uint8_t id;           // its bit in the stage's log of kernels that ran: unique in the table, < 32
    const char* name;     // what kernel_info() reports
    Arch arch;            // the architecture it is compiled for (Any: portable)
    int level;            // the level of that architecture's ladder that admits it
    bool (*available)();  // the host has what it needs (the cap aside)
    Fn fn;                // its entry points: the stage's interface

    bool allowed() const { return (arch == Arch::Any || arch == kArch) && level <= isa_cap() && available(); }
};

enum class Stage : int { ResampleVertical, ResampleHorizontal, Patchify, Expand, Count };
inline constexpr const char* kStageNames[] = {"resample.vertical", "resample.horizontal", "patchify", "expand"};

// resample.vertical: one output row from the rows of its window (resample/kernels.hpp).
inline constexpr KernelRow<VerticalRowFn> kVerticalKernels[] = {
#if SMG_X86
    {3, "avx512", Arch::X86, kX86Avx512, host_avx512, vertical_row_avx512},
    {2, "avx2", Arch::X86, kX86Avx2, host_avx2, vertical_row_avx2},
    {5, "avx2-madd", Arch::X86, kX86Avx2, host_avx2, vertical_row_avx2_madd},  // only where tuning picks it
    {1, "sse2", Arch::X86, kBaseline, always, vertical_row_sse2},
#elif defined(__aarch64__)
    {4, "neon", Arch::Arm64, kBaseline, always, vertical_row_neon},
#endif
    {0, "scalar", Arch::Any, kBaseline, always, vertical_row_scalar},
};

// resample.horizontal: a plan per resize, then rows (resample/kernels.hpp). The SIMD kernels take
// 3- and 4-channel rows (SSE2 and NEON also need weights that split into 16-bit halves, which
// every real filter's do); 1- and 2-channel rows take the scalar kernel.
inline constexpr KernelRow<HorizontalKernel> kHorizontalKernels[] = {
#if SMG_X86
    {4, "avx512vnni", Arch::X86, kX86Avx512Vnni, host_avx512vnni, {horizontal_plan_vbmi, horizontal_rows_vnni}},
    {3, "avx512vbmi", Arch::X86, kX86Avx512, host_avx512vbmi, {horizontal_plan_vbmi, horizontal_rows_vbmi}},
    {2, "avx2", Arch::X86, kX86Avx2, host_avx2, {horizontal_plan_avx2, horizontal_rows_avx2}},
    {1, "sse2", Arch::X86, kBaseline, always, {horizontal_plan_sse2, horizontal_rows_sse2}},
#elif defined(__aarch64__)
    {5, "neon", Arch::Arm64, kBaseline, always, {horizontal_plan_neon, horizontal_rows_neon}},
#endif
    {0, "scalar", Arch::Any, kBaseline, always, {horizontal_plan_scalar, horizontal_rows_scalar}},
};

// patchify: fused normalize + patchify (patchify/kernels.hpp). A SIMD kernel is used for a
// normalization only if its prepare() reproduced all 768 table values; the AVX-512 one takes
// patches up to 16 pixels (channel-first and channel-last; the AVX2 one writes channel-last
// patches through the table), the AVX2 one from 4 (its whole-vector stores spill past smaller
// rows) to whole images and tiles (sides above kMaxPatch come with one temporal copy, which it
// never keeps). The NEON one (aarch64's baseline) takes every side, in both orders.
inline constexpr KernelRow<PatchifyKernel> kPatchifyKernels[] = {
#if SMG_X86
    {2,
     "avx512vbmi",
     Arch::X86,
     kX86Avx512,
     host_avx512vbmi,
     {1, 16, patchify_prepare_avx512, patchify_avx512, patchify_avx512_channels_last}},
    {1,
     "avx2",
     Arch::X86,
     kX86Avx2,
     host_avx2_fma_f16c,
     {4, kMaxImagePatch, patchify_prepare_avx2, patchify_avx2, nullptr}},
#elif defined(__aarch64__)
    {3,
     "neon",
     Arch::Arm64,
     kBaseline,
     always,
     {1, kMaxImagePatch, patchify_prepare_neon, patchify_neon, patchify_neon_channels_last}},
#endif
    {0, "table", Arch::Any, kBaseline, always, {1, kMaxImagePatch, patchify_prepare_table, patchify_table, nullptr}},
};

// expand: the compact format's codes and table back to 2- or 4-byte values, one channel's
// stretch at a time (expand/kernels.hpp). Every kernel takes every input. No AVX2 row: its
// vpgatherdd form (2-byte values: dword gathers masked and packed to words) was slower than the
// scalar lookups on the hosts measured (docs/kernels.md).
inline constexpr KernelRow<ExpandKernel> kExpandKernels[] = {
#if SMG_X86
    {1, "avx512vbmi", Arch::X86, kX86Avx512, host_avx512vbmi, {true, expand16_avx512, expand32_avx512}},
#elif defined(__aarch64__)
    {2, "neon", Arch::Arm64, kBaseline, always, {true, expand16_neon, expand32_neon}},
#endif
    {0, "scalar", Arch::Any, kBaseline, always, {false, expand16_scalar, expand32_scalar}},
};

// Rows best first (levels never rise), ids unique and below 32, and a last row that is portable
// and always allowed, so that every selection ends at a kernel.
template <class Fn, size_t N>
constexpr bool well_formed(const KernelRow<Fn> (&t)[N]) {
    const KernelRow<Fn>& last = t[N - 1];
    if (last.arch != Arch::Any || last.level != kBaseline || last.available != always) return false;
    for (size_t i = 0; i < N; ++i) {
        if (t[i].id >= 32 || (i > 0 && t[i].level > t[i - 1].level)) return false;
        for (size_t j = 0; j < i; ++j)
            if (t[i].id == t[j].id) return false;
    }
    return true;
}
static_assert(well_formed(kVerticalKernels));
static_assert(well_formed(kHorizontalKernels));
static_assert(well_formed(kPatchifyKernels));
static_assert(well_formed(kExpandKernels));

// The first row allowed here: what the stage runs wherever its kernels all take the input.
template <class Fn, size_t N>
const KernelRow<Fn>& first_allowed(const KernelRow<Fn> (&t)[N]) {
    for (const KernelRow<Fn>& row : t)
        if (row.allowed()) return row;
    return t[N - 1];  // not reached: the last row is always allowed
}

// ---- what ran ----

// One bit per row id and stage; set the first time the kernel runs, never cleared.
inline std::atomic<uint32_t> g_kernels_ran[int(Stage::Count)]{};

// Called per row or per band: a plain load while the bit is already set, so the hot path does
// not bounce a shared cache line between threads.
inline void note_ran(Stage s, uint8_t id) {
    std::atomic<uint32_t>& ran = g_kernels_ran[int(s)];
    const uint32_t bit = uint32_t(1) << id;
    if (!(ran.load(std::memory_order_relaxed) & bit)) ran.fetch_or(bit, std::memory_order_relaxed);
}

// ---- the report kernel_info() and cpu_features() give ----

struct KernelReport {
    const char* stage;
    const char* name;
    const char* arch;     // "any", "x86" or "arm64"
    const char* min_cap;  // the lowest SMG_FAST_ISA cap that admits it
    bool ran;
};

struct DispatchReport {
    const char* cap;                                            // the cap in force, by name
    const char* cap_env;                                        // SMG_FAST_ISA as set, or nullptr
    std::vector<std::pair<const char*, bool>> host;             // features the CPU has (the cap aside)
    std::vector<std::pair<const char*, bool>> usable;           // the same after the cap
    std::vector<std::pair<const char*, const char*>> selected;  // stage -> kernel (3-4 channel input)
    std::vector<KernelReport> kernels;                          // every stage's, lowest first
};

DispatchReport dispatch_report();

}  // namespace smg
