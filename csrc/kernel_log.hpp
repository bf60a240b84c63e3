// Which kernel variants the dispatch selects and which have run in this process: the proof,
// per stage, that a test exercised the kernels it meant to (their results are identical, so
// nothing else would notice a fast path going missing or a cap being ignored).
#pragma once

#include <atomic>
#include <cstdint>

#include "cpu.hpp"

namespace smg {

enum class KernelId : int {
    VerticalScalar,
    VerticalSse2,
    VerticalAvx2,
    VerticalAvx512,
    HorizontalScalar,
    HorizontalSse2,
    HorizontalAvx2,
    HorizontalAvx512Vbmi,
    HorizontalAvx512Vnni,
    PatchifyTable,
    PatchifyAvx2,
    PatchifyAvx512Vbmi,
    Count,
};

struct KernelDesc {
    const char* stage;  // "resample.vertical", "resample.horizontal", "patchify"
    const char* name;   // "scalar", "avx2", ...
    int level;          // IsaLevel the kernel needs
};

const KernelDesc& kernel_desc(KernelId id);

// One bit per KernelId; set the first time the kernel runs, never cleared.
inline std::atomic<uint32_t> g_kernels_ran{0};

// Called per row or per band: a plain load while the bit is already set, so the hot path does
// not bounce a shared cache line between threads.
inline void note_ran(KernelId id) {
    const uint32_t bit = uint32_t(1) << int(id);
    if (!(g_kernels_ran.load(std::memory_order_relaxed) & bit)) g_kernels_ran.fetch_or(bit, std::memory_order_relaxed);
}

// The dispatch's choice under the cap, for the inputs the fast kernels take (3 or 4 channels;
// 1- and 2-channel rows always use the scalar horizontal kernel, as do weights too wide to split).
inline KernelId vertical_kernel() {
    if (cpu_has_avx512()) return KernelId::VerticalAvx512;
    if (cpu_has_avx2()) return KernelId::VerticalAvx2;
    return SMG_X86 ? KernelId::VerticalSse2 : KernelId::VerticalScalar;  // SSE2: any x86-64
}

inline KernelId horizontal_kernel() {
    if (cpu_has_avx512vnni()) return KernelId::HorizontalAvx512Vnni;
    if (cpu_has_avx512vbmi()) return KernelId::HorizontalAvx512Vbmi;
    if (cpu_has_avx2()) return KernelId::HorizontalAvx2;
    return SMG_X86 ? KernelId::HorizontalSse2 : KernelId::HorizontalScalar;  // SSE2: any x86-64
}

// The AVX2 patchify kernel also converts with FMA and F16C, which every AVX2 CPU has but a
// virtual machine may hide.
inline bool cpu_has_patchify_avx2() {
#if SMG_X86
    static const bool v = cpu_has_avx2() && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    return v;
#else
    return false;
#endif
}

// For patches of up to 16 pixels; larger ones take the AVX2 kernel on AVX-512 hosts too. A
// SIMD kernel computes with arithmetic only where that matches the table (see Normalizer); the
// AVX2 kernel's gather form matches any table.
inline KernelId patchify_kernel() {
    if (cpu_has_avx512vbmi()) return KernelId::PatchifyAvx512Vbmi;
    if (cpu_has_patchify_avx2()) return KernelId::PatchifyAvx2;
    return KernelId::PatchifyTable;
}

}  // namespace smg
