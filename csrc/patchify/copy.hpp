// uint8 patches: the resized bytes themselves in the patch layout (no normalization), what
// transformers' torchvision processors return with do_rescale=False, do_normalize=False.
#pragma once

#include <cstdint>

#include "image.hpp"
#include "patchify/layout.hpp"

namespace smg {

// Writes the m * gw patch rows of merged block row bh, as Patchifier::block_row does for the
// other dtypes (same layout, padding reads as 0), from band (3 or 4 channels).
void block_row_u8(const ImageView& band, const PatchLayout& L, uint8_t* dst, int bh);

}  // namespace smg
