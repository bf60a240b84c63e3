// The floating-point environment the normalization is defined in: round to nearest, denormals
// kept. The table and the check that a SIMD kernel reproduces it run under it, and so must the
// kernel on every thread; a caller may have changed its own (fesetround, flush-to-zero as
// torch.set_flush_denormal sets it), which would change values and make them depend on which
// thread computed a band.
#pragma once

#include "cpu.hpp"

#include <cstdint>

#if SMG_X86
#include <xmmintrin.h>
#endif

namespace smg {

// While alive, SSE/AVX arithmetic on this thread uses the default MXCSR (0x1F80: all exceptions
// masked, round to nearest, no FTZ/DAZ); the thread's own is restored after.
class DefaultFpEnv {
public:
#if SMG_X86
    DefaultFpEnv() : saved_(_mm_getcsr()) {
        if (saved_ != kDefault) _mm_setcsr(kDefault);
    }
    ~DefaultFpEnv() {
        if (saved_ != kDefault) _mm_setcsr(saved_);
    }

private:
    static constexpr unsigned kDefault = 0x1F80;
    unsigned saved_;
#elif defined(__aarch64__)
    // FPCR, which governs scalar and NEON arithmetic alike: round to nearest (RMode 0), no
    // flush-to-zero (FZ, FZ16), no default NaN (DN), IEEE half precision (AHP); the trap enables
    // are left as they are.
    DefaultFpEnv() : saved_(read()) {
        if (saved_ & kMask) write(saved_ & ~kMask);
    }
    ~DefaultFpEnv() {
        if (saved_ & kMask) write(saved_);
    }

private:
    static constexpr uint64_t kMask = (uint64_t(1) << 19) | (uint64_t(0x1F) << 22);  // FZ16; RMode, FZ, DN, AHP
    static uint64_t read() {
        uint64_t v;
        __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
        return v;
    }
    static void write(uint64_t v) { __asm__ __volatile__("msr fpcr, %0" : : "r"(v)); }
    uint64_t saved_;
#else
    // Elsewhere the portable kernels read the table only. (User-provided, so that a guard object
    // does not count as an unused variable.)
    DefaultFpEnv() {}
    ~DefaultFpEnv() {}
#endif
public:
    DefaultFpEnv(const DefaultFpEnv&) = delete;
    DefaultFpEnv& operator=(const DefaultFpEnv&) = delete;
};

}  // namespace smg
