// Channel-last patches (PatchOrder::ChannelLast): each patch row holds its pixels as an RGB image
// holds them, every value looked up in the normalization table.
#pragma once

#include "image.hpp"
#include "normalize/lut.hpp"
#include "patchify/layout.hpp"

namespace smg {

// Writes the gw patch rows of grid row bh (merge 1, temporal 1), as Patchifier::block_row does
// for the channel-first order: band holds image rows [bh * P, bh * P + band.height) with
// band.width valid columns, 3 or 4 channels; anything outside reads as pixel 0. lut is the
// Normalizer's 3 x 256 table in dtype dt (uint8's is the identity).
void block_row_channels_last(const ImageView& band, const PatchLayout& L, DType dt, const void* lut, void* dst, int bh);

}  // namespace smg
