// Run-time CPU feature checks for the hand-vectorized kernels. One binary runs on any x86-64:
// the SIMD versions are compiled with target attributes and chosen here, never by -march.
#pragma once

namespace smg {

inline bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = __builtin_cpu_supports("avx2");
    return v;
#else
    return false;
#endif
}

inline bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
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

}  // namespace smg

// Plain loops that GCC vectorizes well get an AVX-512, an AVX2 and a baseline clone, picked
// once at load time through an ifunc.
#if defined(__x86_64__)
#define SMG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SMG_CLONES
#endif
