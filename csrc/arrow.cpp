#include "arrow.hpp"

#include <stdexcept>
#include <string>

namespace smg {

const uint8_t* arrow_rgbx_pixels(const ArrowSchema* schema, const ArrowArray* array, int64_t width, int64_t height) {
    if (!schema || !array || !schema->release || !array->release || !schema->format)
        throw std::invalid_argument("arrow_rgbx: released or empty Arrow structures");
    if (std::string(schema->format) != "+w:4" || schema->n_children != 1 || !schema->children[0] ||
        std::string(schema->children[0]->format ? schema->children[0]->format : "") != "C")
        throw std::invalid_argument("arrow_rgbx: not a fixed-size list of 4 uint8");
    if (width < 1 || height < 1 || array->length != width * height || array->offset != 0 || array->null_count > 0 ||
        array->n_children != 1 || !array->children[0])
        throw std::invalid_argument("arrow_rgbx: unexpected array layout");
    const ArrowArray* child = array->children[0];
    if (child->n_buffers != 2 || child->offset != 0 || child->length != width * height * 4 || !child->buffers[1])
        throw std::invalid_argument("arrow_rgbx: unexpected pixel buffer");
    return static_cast<const uint8_t*>(child->buffers[1]);
}

}  // namespace smg
