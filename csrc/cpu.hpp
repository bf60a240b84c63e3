// Run-time CPU feature checks for the hand-vectorized kernels. One binary runs on any x86-64:
// the SIMD versions are compiled with target attributes and chosen here, never by -march.
#pragma once

#include <cstdlib>
#include <cstring>

namespace smg {

// SMG_FAST_ISA caps the hand-written kernels: "avx512" (default: whatever the CPU has),
// "avx512-novnni", "avx2" or "baseline". Used to test every code path on one machine; results
// are identical anyway.
inline int isa_cap() {
    static const int cap = [] {
        const char* v = std::getenv("SMG_FAST_ISA");
        if (!v || !*v || std::strcmp(v, "avx512") == 0 || std::strcmp(v, "native") == 0) return 3;
        if (std::strcmp(v, "avx512-novnni") == 0) return 2;
        if (std::strcmp(v, "avx2") == 0) return 1;
        return 0;  // "baseline" (or anything unknown: the safe choice)
    }();
    return cap;
}

inline bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = isa_cap() >= 1 && __builtin_cpu_supports("avx2");
    return v;
#else
    return false;
#endif
}

inline bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = isa_cap() >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
    return v;
#else
    return false;
#endif
}

// AVX-512 VBMI adds vpermb / vpermi2b: arbitrary byte shuffles across a whole 64-byte register.
inline bool cpu_has_avx512vbmi() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = cpu_has_avx512() && __builtin_cpu_supports("avx512vbmi");
    return v;
#else
    return false;
#endif
}

// AVX-512 VNNI: vpdpwssd, a 16-bit multiply-add into 32-bit accumulators in one instruction.
inline bool cpu_has_avx512vnni() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = isa_cap() >= 3 && cpu_has_avx512vbmi() && __builtin_cpu_supports("avx512vnni");
    return v;
#else
    return false;
#endif
}

}  // namespace smg

// Plain loops that GCC vectorizes well get an AVX-512, an AVX2 and a baseline clone, picked
// once at load time through an ifunc.
#if defined(__x86_64__)
#define SMG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SMG_CLONES
#endif
