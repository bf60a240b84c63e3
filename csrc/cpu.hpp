// What the host CPU supports, detected once, whatever SMG_FAST_ISA says (dispatch.hpp applies
// the cap). One binary runs on any x86-64: the SIMD kernels are compiled with target attributes
// and chosen at run time, never by -march. On aarch64 nothing is detected: its kernels are NEON,
// which AArch64 itself includes.
#pragma once

// SMG_X86: x86 intrinsics (<immintrin.h>, target attributes) are compiled only under this.
#if defined(__x86_64__) || defined(_M_X64)
#define SMG_X86 1
#else
#define SMG_X86 0
#endif

namespace smg {

struct HostIsa {
    bool avx2 = false;
    bool avx512 = false;      // AVX-512 F, BW and VL
    bool avx512vbmi = false;  // and VBMI: vpermb / vpermi2b, byte shuffles across a 64-byte register
    bool avx512vnni = false;  // and VNNI: vpdpwssd, 16-bit multiply-add into 32-bit sums
    bool fma_f16c = false;    // FMA and F16C: every AVX2 CPU has them, a virtual machine may hide them
};

inline const HostIsa& host_isa() {
    static const HostIsa v = [] {
        HostIsa r;
#if SMG_X86
        r.avx2 = __builtin_cpu_supports("avx2");
        r.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl");
        r.avx512vbmi = r.avx512 && __builtin_cpu_supports("avx512vbmi");
        r.avx512vnni = r.avx512vbmi && __builtin_cpu_supports("avx512vnni");
        r.fma_f16c = __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
        return r;
    }();
    return v;
}

// The checks the dispatch tables name (a row's `available`).
inline bool host_avx2() { return host_isa().avx2; }
inline bool host_avx2_fma_f16c() { return host_isa().avx2 && host_isa().fma_f16c; }
inline bool host_avx512() { return host_isa().avx512; }
inline bool host_avx512vbmi() { return host_isa().avx512vbmi; }
inline bool host_avx512vnni() { return host_isa().avx512vnni; }

}  // namespace smg
