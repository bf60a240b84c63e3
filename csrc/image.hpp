// Plain views of interleaved 8-bit images: no ownership, explicit row stride in bytes.
#pragma once

#include <cstdint>

namespace smg {

struct ImageView {
    const uint8_t* data;
    int width;
    int height;
    int channels;
    int64_t stride;  // bytes between rows, >= width * channels
};

struct MutImageView {
    uint8_t* data;
    int width;
    int height;
    int channels;
    int64_t stride;
};

}  // namespace smg
