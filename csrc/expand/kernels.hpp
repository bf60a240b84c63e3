// The compact format's expansion kernels: the interface of the stage's dispatch table
// (dispatch.hpp) and the entry points each instruction set's file defines. A kernel expands one
// stretch of codes that share a channel: out[i] = values[codes[i]], 2- or 4-byte elements. Every
// kernel is a pure table lookup, so all of them write the same bytes.
#pragma once

#include <cstdint>

#include "cpu.hpp"

namespace smg {

// One channel's table: its 256 values and the same values as byte planes (plane b holds byte b,
// little-endian, of every value: planes[256 * b + code]; 2 planes for 2-byte values, 4 for 4-byte;
// 64-byte aligned). The SIMD kernels look bytes up in the planes and interleave them.
struct ExpandChannel {
    const void* values;
    const uint8_t* planes;
};

struct ExpandKernel {
    bool planes;  // reads ExpandChannel::planes (the driver builds them only for such kernels)
    void (*run16)(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out);
    void (*run32)(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out);
};

// expand/scalar.cpp: one lookup per element, portable.
void expand16_scalar(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out);
void expand32_scalar(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out);

#if SMG_X86
// expand/avx512.cpp: AVX-512 VBMI, 64 codes a step: two vpermi2b and a blend on bit 7 per byte
// plane, the planes interleaved by unpacks of pre-permuted codes.
void expand16_avx512(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out);
void expand32_avx512(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out);
#endif

#if defined(__aarch64__)
// expand/neon.cpp: 16 codes a step, four chained 64-byte table lookups (tbl, then tbx) per byte
// plane, interleaved by st2 / st4.
void expand16_neon(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint16_t* out);
void expand32_neon(const uint8_t* codes, int64_t len, const ExpandChannel& t, uint32_t* out);
#endif

}  // namespace smg
