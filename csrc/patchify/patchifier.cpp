#include "patchify/patchifier.hpp"

#include <cstdint>

#include "patchify/channels_last.hpp"
#include "patchify/copy.hpp"

namespace smg {

Patchifier::Patchifier(const PatchLayout& L, const Normalizer& norm, PatchOrder order)
    : L_(L), norm_(&norm), order_(order), choice_(norm.kernel_for(L.patch, L.merge, L.temporal, order)) {}

void Patchifier::block_row(const ImageView& band, int bh, void* dst) const {
    if (order_ == PatchOrder::ChannelLast) {  // the kernel's channel-last form, else the table
        if (choice_.kernel && choice_.kernel->fn.channels_last) {
            note_ran(Stage::Patchify, choice_.kernel->id);
            choice_.kernel->fn.channels_last(band, L_, *choice_.prep, norm_->dtype(), norm_->lut(), dst, bh);
        } else {
            block_row_channels_last(band, L_, norm_->dtype(), norm_->lut(), dst, bh);
        }
        return;
    }
    if (!choice_.kernel) {  // uint8: the table is the identity
        block_row_u8(band, L_, static_cast<uint8_t*>(dst), bh);
        return;
    }
    note_ran(Stage::Patchify, choice_.kernel->id);
    choice_.kernel->fn.block_row(band, L_, *choice_.prep, norm_->dtype(), norm_->lut(), dst, bh);
}

}  // namespace smg
