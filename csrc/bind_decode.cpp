// Decoding helpers: Arrow views of Pillow images, PNG unfiltering, the native JPEG decoder.
#include <string>

#include "arrow.hpp"
#include "bind_common.hpp"
#include "decode/jpeg.hpp"
#include "decode/png_unfilter.hpp"

namespace smg::bind {

namespace {

// A (height, width, 4) uint8 view of a Pillow RGB image exported as Arrow (fixed-size lists of 4
// bytes: R, G, B, pad). The view keeps both capsules (and so the exported memory) alive.
py::array arrow_rgbx(const py::capsule& schema_cap, const py::capsule& array_cap, int64_t width, int64_t height) {
    if (std::string(schema_cap.name() ? schema_cap.name() : "") != "arrow_schema" ||
        std::string(array_cap.name() ? array_cap.name() : "") != "arrow_array")
        throw py::value_error("arrow_rgbx: expected arrow_schema and arrow_array capsules");
    const uint8_t* data =
        arrow_rgbx_pixels(schema_cap.get_pointer<ArrowSchema>(), array_cap.get_pointer<ArrowArray>(), width, height);
    py::tuple owner = py::make_tuple(schema_cap, array_cap);
    py::array out(py::dtype::of<uint8_t>(), {height, width, int64_t(4)}, {width * 4, int64_t(4), int64_t(1)}, data,
                  owner);
    make_read_only(out);
    return out;
}

// py::array, not array_t: a conversion would undo the filters in a copy, not in data.
bool png_unfilter_py(py::array data, int64_t height, int64_t row_bytes, int bpp) {
    if (data.dtype().kind() != 'u' || data.itemsize() != 1 || data.ndim() != 1 || !data.writeable() ||
        data.strides(0) != 1)
        throw py::value_error("png_unfilter: expected a writable contiguous 1-D uint8 array");
    uint8_t* p = static_cast<uint8_t*>(data.mutable_data());
    py::gil_scoped_release release;
    return png_unfilter(p, data.shape(0), height, row_bytes, bpp);
}

// 0 / 1: decoded into out (packed, writable (H, W, 3)) whole / in two bands, 2: a case it does
// not take, 3: libjpeg reported an error or a warning. The buffer_info holds data meanwhile.
int jpeg_decode_py(const py::buffer& data, py::array out, int bands) {
    const py::buffer_info b = data.request();
    const ImageView v = image_view(out, "jpeg_decode");
    if (!is_bytes(b) || out.ndim() != 3 || v.channels != 3 || !out.writeable() || bands < 0 || bands > 2)
        throw py::value_error(
            "jpeg_decode: expected contiguous bytes, a writable packed (H, W, 3) uint8 array, bands 0-2");
    auto* o = static_cast<uint8_t*>(out.mutable_data());
    py::gil_scoped_release release;
    return int(jpeg_decode_rgb(static_cast<const uint8_t*>(b.ptr), size_t(b.size), o, v.stride, v.width, v.height,
                               JpegBands(bands)));
}

}  // namespace

void bind_decode(py::module_& m) {
    m.def("arrow_rgbx", &arrow_rgbx, py::arg("schema"), py::arg("array"), py::arg("width"), py::arg("height"),
          "A read-only (height, width, 4) uint8 view of a Pillow RGB image exported through the Arrow\n"
          "C data interface (its arrow_schema and arrow_array capsules), without a copy.");
    m.def("png_unfilter", &png_unfilter_py, py::arg("data"), py::arg("height"), py::arg("row_bytes"), py::arg("bpp"),
          "Undoes PNG's row filters in place: height rows of a filter byte and row_bytes bytes, bpp\n"
          "bytes per pixel (ValueError if data is shorter). False at a filter type outside 0-4.");
    m.def(
        "jpeg_bind", [](const std::string& path) { return jpeg_bind(path.c_str()); }, py::arg("path"),
        "Binds jpeg_decode to the libjpeg already loaded from path (Pillow's); '' or why not.");
    m.def("jpeg_decode", &jpeg_decode_py, py::arg("data"), py::arg("out"), py::arg("bands"),
          "JPEG bytes to RGB in out with Pillow's libjpeg settings; bands 0 never, 1 when idle, 2 always.\n"
          "0 whole, 1 banded, 2 not taken, 3 libjpeg error or warning (out partial). No GIL.");
}

}  // namespace smg::bind
