// One image from decoded RGB to encoder input: Pillow-exact resize into a pooled scratch image,
// then the fused normalize + patchify straight into the caller's destination.
#pragma once

#include "image.hpp"
#include "normalize.hpp"
#include "patchify.hpp"
#include "resample.hpp"

namespace smg {

struct PreprocessSpec {
    int resize_w;
    int resize_h;
    Filter filter;
    PassOrder order;
    PatchLayout layout;
    DType dtype;
    Normalization norm;
};

void preprocess(const ImageView& src, const PreprocessSpec& spec, void* dst);

}  // namespace smg
