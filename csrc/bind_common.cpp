#include "bind_common.hpp"

#include <string>

namespace smg::bind {

ImageView image_view(const py::array& a, const char* what) {
    if (!py::isinstance<py::array_t<uint8_t>>(a) || a.dtype().kind() != 'u' || a.itemsize() != 1)
        throw py::type_error(std::string(what) + ": expected a uint8 array");
    if (a.ndim() != 2 && a.ndim() != 3)
        throw py::value_error(std::string(what) + ": expected shape (H, W) or (H, W, C)");
    const int64_t h = a.shape(0), w = a.shape(1);
    const int64_t c = a.ndim() == 3 ? a.shape(2) : 1;
    if (h < 1 || w < 1) throw py::value_error(std::string(what) + ": empty image");
    if (h > kMaxSide || w > kMaxSide) throw py::value_error(std::string(what) + ": image side too large");
    if (c < 1 || c > 4) throw py::value_error(std::string(what) + ": expected 1 to 4 channels");
    // The stride of an axis of length 1 is meaningless (arr[:, :, None] gives a channel 0; a
    // transposed 1-pixel-tall image keeps its old row stride, even a negative one).
    const int64_t row = h == 1 ? w * c : a.strides(0);
    const bool packed = (a.ndim() == 2 || c == 1 || a.strides(2) == 1) && (w == 1 || a.strides(1) == c) && row >= w * c;
    if (!packed) throw py::value_error(std::string(what) + ": pixels must be packed (use np.ascontiguousarray)");
    return ImageView{static_cast<const uint8_t*>(a.data()), int(w), int(h), int(c), row};
}

bool is_bytes(const py::buffer_info& b) { return b.ndim == 1 && b.itemsize == 1 && b.strides[0] == 1; }

void make_read_only(py::array& a) {
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
}

PixelFormat checked_format(const py::object& fmt, const ImageView& in, const char* what) {
    PixelFormat f;
    if (fmt.is_none()) {
        if (in.channels != 3 && in.channels != 4)
            throw py::value_error(std::string(what) + ": an image with " + std::to_string(in.channels) +
                                  " channels needs an explicit fmt (3 and 4 default to RGB and RGBX)");
        f = default_format(in.channels);
    } else {
        f = fmt.cast<PixelFormat>();
    }
    if (!is_valid_format(f))
        throw py::value_error(std::string(what) + ": unknown pixel format " + std::to_string(int(f)));
    if (in.channels != format_channels(f))
        throw py::value_error(std::string(what) + ": pixel format " + std::to_string(int(f)) + " reads " +
                              std::to_string(format_channels(f)) + " channels, the image has " +
                              std::to_string(in.channels));
    return f;
}

py::dict int_dict(std::initializer_list<std::pair<const char*, py::int_>> items) {
    py::dict d;
    for (const auto& [k, v] : items) d[k] = v;
    return d;
}

}  // namespace smg::bind
