#include "preprocess.hpp"

#include "scratch.hpp"

namespace smg {

void preprocess(const ImageView& src, const PreprocessSpec& spec, void* dst) {
    if (src.width == spec.resize_w && src.height == spec.resize_h) {
        // Pillow's resize to the same size is a copy: read the source directly.
        patchify(src, spec.layout, spec.dtype, spec.lut, dst);
        return;
    }
    const int64_t stride = int64_t(spec.resize_w) * 3;
    ScratchBuffer resized(size_t(stride) * spec.resize_h + 64);
    const MutImageView out{resized.as<uint8_t>(), spec.resize_w, spec.resize_h, 3, stride};
    resize(src, out, spec.filter, spec.order);
    patchify(ImageView{out.data, out.width, out.height, 3, stride}, spec.layout, spec.dtype, spec.lut, dst);
}

}  // namespace smg
