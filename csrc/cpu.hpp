// Run-time CPU feature checks for the hand-vectorized kernels. One binary runs on any x86-64:
// the SIMD versions are compiled with target attributes and chosen here, never by -march.
// Elsewhere (aarch64) only the portable scalar kernels are compiled; no cpuid there.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

// SMG_X86: x86 intrinsics (<immintrin.h>, target attributes) are compiled only under this.
#if defined(__x86_64__) || defined(_M_X64)
#define SMG_X86 1
#else
#define SMG_X86 0
#endif

namespace smg {

// Kernel levels, ordered: a cap admits its own level and every level below it.
enum IsaLevel : int { kIsaBaseline = 0, kIsaAvx2 = 1, kIsaAvx512 = 2, kIsaAvx512Vnni = 3 };

// The SMG_FAST_ISA value, or nullptr when unset; read once, like the cap it sets.
inline const char* isa_cap_env() {
    static const std::string v = [] {
        const char* e = std::getenv("SMG_FAST_ISA");
        return std::string(e ? e : "");
    }();
    return v.empty() ? nullptr : v.c_str();
}

// SMG_FAST_ISA caps the hand-written kernels: "avx512" (default: whatever the CPU has),
// "avx512-novnni", "avx2" or "baseline". Used to test every code path on one machine; results
// are identical anyway. Anything unknown is the safe choice, baseline (kernel_info shows it).
inline int isa_cap() {
    static const int cap = [] {
        const char* v = isa_cap_env();
        if (!v || std::strcmp(v, "avx512") == 0 || std::strcmp(v, "native") == 0) return int(kIsaAvx512Vnni);
        if (std::strcmp(v, "avx512-novnni") == 0) return int(kIsaAvx512);
        if (std::strcmp(v, "avx2") == 0) return int(kIsaAvx2);
        return int(kIsaBaseline);
    }();
    return cap;
}

// What the CPU itself supports, ignoring the cap (reported by kernel_info; dispatch uses the
// cpu_has_* below).
struct HostIsa {
    bool avx2 = false, avx512 = false, avx512vbmi = false, avx512vnni = false;
};

inline HostIsa host_isa() {
    HostIsa h;
#if SMG_X86
    static const HostIsa v = [] {
        HostIsa r;
        r.avx2 = __builtin_cpu_supports("avx2");
        r.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl");
        r.avx512vbmi = r.avx512 && __builtin_cpu_supports("avx512vbmi");
        r.avx512vnni = r.avx512vbmi && __builtin_cpu_supports("avx512vnni");
        return r;
    }();
    h = v;
#endif
    return h;
}

inline bool cpu_has_avx2() {
    static const bool v = isa_cap() >= kIsaAvx2 && host_isa().avx2;
    return v;
}

inline bool cpu_has_avx512() {
    static const bool v = isa_cap() >= kIsaAvx512 && host_isa().avx512;
    return v;
}

// AVX-512 VBMI adds vpermb / vpermi2b: arbitrary byte shuffles across a whole 64-byte register.
inline bool cpu_has_avx512vbmi() {
    static const bool v = cpu_has_avx512() && host_isa().avx512vbmi;
    return v;
}

// AVX-512 VNNI: vpdpwssd, a 16-bit multiply-add into 32-bit accumulators in one instruction.
inline bool cpu_has_avx512vnni() {
    static const bool v = isa_cap() >= kIsaAvx512Vnni && cpu_has_avx512vbmi() && host_isa().avx512vnni;
    return v;
}

}  // namespace smg
