// The SIMD normalize + patchify kernels behind Patchifier (internal to patchify*.cpp). Each ISA
// has a check that recomputes all 768 table values with the very code its kernel runs, so a
// kernel is used only for normalizations it reproduces bit for bit.
#pragma once

#include "cpu.hpp"
#include "image.hpp"
#include "normalize/lut.hpp"
#include "patchify/patchifier.hpp"

namespace smg {

#if SMG_X86
// AVX-512 VBMI, P <= 16 (patchify/avx512.cpp).
bool avx512_matches_lut(const SimdNorm& n, DType dt, const void* lut);
void avx512_block_row(const ImageView& band, const PatchLayout& L, const SimdNorm& n, DType dt, void* dst, int bh);

// AVX2 + FMA + F16C, any P (patchify/avx2.cpp). `lut` is the Normalizer's table (the gather
// form reads it; the arithmetic forms only check against it).
bool avx2_matches_lut(const SimdNorm& n, Avx2Form form, DType dt, const void* lut);
void avx2_block_row(const ImageView& band, const PatchLayout& L, const SimdNorm& n, Avx2Form form, DType dt,
                    const void* lut, void* dst, int bh);
#endif

}  // namespace smg
