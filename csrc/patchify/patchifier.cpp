#include "patchify/patchifier.hpp"

#include <cstdint>

#include "patchify/copy.hpp"

namespace smg {

Patchifier::Patchifier(const PatchLayout& L, const Normalizer& norm)
    : L_(L), norm_(&norm), choice_(norm.kernel_for(L.patch)) {}

void Patchifier::block_row(const ImageView& band, int bh, void* dst) const {
    if (!choice_.kernel) {  // uint8: the table is the identity
        block_row_u8(band, L_, static_cast<uint8_t*>(dst), bh);
        return;
    }
    note_ran(Stage::Patchify, choice_.kernel->id);
    choice_.kernel->fn.block_row(band, L_, *choice_.prep, norm_->dtype(), norm_->lut(), dst, bh);
}

}  // namespace smg
