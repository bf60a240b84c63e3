// The Arrow C data interface (its published ABI), used to read a Pillow image's pixel memory
// without the copy np.asarray(image) makes. Plain C++: the binding layer unwraps the capsules.
#pragma once

#include <cstdint>

namespace smg {

struct ArrowSchema {
    const char* format;
    const char* name;
    const char* metadata;
    int64_t flags;
    int64_t n_children;
    ArrowSchema** children;
    ArrowSchema* dictionary;
    void (*release)(ArrowSchema*);
    void* private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void** buffers;
    ArrowArray** children;
    ArrowArray* dictionary;
    void (*release)(ArrowArray*);
    void* private_data;
};

// The packed R, G, B, pad bytes of a width x height Pillow RGB image exported as Arrow (a
// fixed-size list of 4 uint8 per pixel). Throws std::invalid_argument (message prefixed
// "arrow_rgbx: ") for released structures or any other layout.
const uint8_t* arrow_rgbx_pixels(const ArrowSchema* schema, const ArrowArray* array, int64_t width, int64_t height);

}  // namespace smg
