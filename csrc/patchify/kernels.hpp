// The fused normalize + patchify kernels: the interface of the stage's dispatch table
// (dispatch.hpp) and the entry points each instruction set's file defines. The 3 x 256 table
// (normalize/lut.hpp) defines every output value; a kernel that computes values arithmetically is
// used for a normalization only if all 768 of its values equal the table, which its prepare()
// checks once per normalization (Normalizer), not per image.
#pragma once

#include "cpu.hpp"
#include "image.hpp"
#include "normalize/lut.hpp"
#include "normalize/simd_norm.hpp"
#include "patchify/layout.hpp"

namespace smg {

// A kernel's preparation for one normalization in one dtype.
struct PatchifyPrep {
    SimdNorm norm{};         // the constants its arithmetic reads
    int form = 0;            // which of its forms computes the values (the kernel's own choice)
    const char* label = "";  // what Pipeline.kernel reports: "avx512-fast", "avx2-gather", "table", ...
};

struct PatchifyKernel {
    int min_patch, max_patch;  // the patch sides it takes
    // Prepares it for params in dtype dt (not UInt8), whose table is lut; false when it cannot
    // reproduce lut exactly. Called under DefaultFpEnv (fp_env.hpp).
    bool (*prepare)(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep);
    // Writes the m * gw patch rows of merged block row bh into dst (Patchifier::block_row's
    // contract); lut is the table prep was checked against.
    void (*block_row)(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                      void* dst, int bh);
    // The same for channel-last patches (block_row_channels_last's contract), or null where the
    // kernel has no such form (the table then writes them).
    void (*channels_last)(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt,
                          const void* lut, void* dst, int bh);
};

// patchify/scalar.cpp: table lookups, portable; any normalization.
bool patchify_prepare_table(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep);
void patchify_table(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                    void* dst, int bh);

#if SMG_X86
// patchify/avx2.cpp: AVX2 + FMA + F16C; single precision where it matches the table, else gathers
// from the table (which always matches).
bool patchify_prepare_avx2(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep);
void patchify_avx2(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                   void* dst, int bh);

// patchify/avx512.cpp: AVX-512 VBMI, P <= 16; single precision where it matches the table, else the
// reference's double-precision order.
bool patchify_prepare_avx512(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep);
void patchify_avx512(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                     void* dst, int bh);
void patchify_avx512_channels_last(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt,
                                   const void* lut, void* dst, int bh);
#endif

#if defined(__aarch64__)
// patchify/neon.cpp: NEON, any patch size, channel-first and channel-last; single precision where
// it matches the table (else the table kernel is used).
bool patchify_prepare_neon(const NormParams& params, DType dt, const void* lut, PatchifyPrep& prep);
void patchify_neon(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt, const void* lut,
                   void* dst, int bh);
void patchify_neon_channels_last(const ImageView& band, const PatchLayout& L, const PatchifyPrep& prep, DType dt,
                                 const void* lut, void* dst, int bh);
#endif

}  // namespace smg
