// Fused normalize + patchify: resized uint8 RGB -> the encoder's patch layout in one pass, each
// value normalized exactly as the reference does and stored in the output dtype.
#pragma once

#include "image.hpp"
#include "patchify/layout.hpp"
#include "patchify/normalizer.hpp"

namespace smg {

// Writes the patch rows of one image; cheap to make (the Normalizer did the preparation). The
// Normalizer must outlive it.
class Patchifier {
public:
    Patchifier(const PatchLayout& L, const Normalizer& norm, PatchOrder order = PatchOrder::ChannelFirst);
    // Writes the m * gw patch rows of merged block row bh. `band` holds image rows
    // [bh * m * P, bh * m * P + band.height) with band.width valid columns; anything outside is
    // padding. band.channels is 3 (RGB) or 4 (RGBX, the 4th byte ignored). dst points at the
    // first patch row of the whole image. With PatchOrder::ChannelLast (merge 1) a block row is
    // one grid row of channel-last patches (patchify/channels_last.hpp).
    void block_row(const ImageView& band, int bh, void* dst) const;

private:
    PatchLayout L_;
    const Normalizer* norm_;
    PatchOrder order_;
    PatchifyChoice choice_;  // norm.kernel_for(L.patch, L.merge, L.temporal, order)
};

}  // namespace smg
