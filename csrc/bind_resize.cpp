// The resampler alone (resize, the rows a band reads) and the pixel-format conversion alone.
#include <algorithm>
#include <string>
#include <vector>

#include "bind_common.hpp"
#include "convert.hpp"
#include "parallel.hpp"
#include "resample/resizer.hpp"
#include "resample/torch_weights.hpp"

namespace smg::bind {

namespace {

// The enums arrive from Python as any integer (py::enum_ constructs from int), so each is
// checked before it reaches code that switches on it.
void check_resize(int out_w, int out_h, Filter filter, PassOrder order, Resampler rs) {
    if (out_w < 1 || out_h < 1 || out_w > kMaxSide || out_h > kMaxSide)
        throw py::value_error("resize: output size must be positive and at most 2^20 per side");
    if (!is_valid_filter(filter))
        throw py::value_error("resize: unknown resampling filter " + std::to_string(int(filter)));
    if (!is_valid_pass_order(order)) throw py::value_error("resize: unknown pass order " + std::to_string(int(order)));
    if (!is_valid_resampler(rs)) throw py::value_error("resize: unknown resampler " + std::to_string(int(rs)));
    if (rs == Resampler::Torch && !torch_implements(filter))
        throw py::value_error("resize: the torch resampler implements BICUBIC, BILINEAR and LANCZOS only");
}

py::array resize_py(const py::array& src, int out_w, int out_h, Filter filter, PassOrder order, Resampler rs) {
    const ImageView in = image_view(src, "resize");
    check_resize(out_w, out_h, filter, order, rs);
    std::vector<py::ssize_t> shape{out_h, out_w};
    if (src.ndim() == 3) shape.push_back(in.channels);
    py::array_t<uint8_t> out(shape);
    const MutImageView ov{out.mutable_data(), out_w, out_h, in.channels, int64_t(out_w) * in.channels};
    {
        py::gil_scoped_release release;
        resize(in, ov, filter, order, rs);
    }
    return out;
}

// src read in a pixel format and resized; 3 channels out where the Resizer makes that free.
py::array resize_rgb_py(const py::array& src, int out_w, int out_h, Filter filter, PassOrder order, Resampler rs,
                        PixelFormat fmt) {
    const ImageView in = image_view(src, "resize_rgb");
    const PixelFormat f = checked_format(py::cast(fmt), in, "resize_rgb");
    check_resize(out_w, out_h, filter, order, rs);
    const Resizer resizer(in, out_w, out_h, filter, order, rs, /*rgb_out=*/true, f);
    const int C = resizer.out_channels();
    py::array_t<uint8_t> out({int64_t(out_h), int64_t(out_w), int64_t(C)});
    uint8_t* o = out.mutable_data();
    const int64_t stride = int64_t(out_w) * C;
    constexpr int kBand = 32;  // output rows per unit: the intermediate of a band stays in cache
    py::gil_scoped_release release;
    parallel_for((out_h + kBand - 1) / kBand, 1, [&](int64_t b, int64_t e) {
        RowCarry carry;
        for (int64_t i = b; i < e; ++i) {
            const int y0 = int(i) * kBand, y1 = std::min(out_h, y0 + kBand);
            resizer.rows(y0, y1, o + int64_t(y0) * stride, stride, &carry);
        }
    });
    return out;
}

// The whole image converted to a new packed (H, W, 3) RGB array: what run() reads, row by row.
py::array to_rgb_py(const py::array& src, PixelFormat fmt) {
    const ImageView in = image_view(src, "to_rgb");
    const PixelFormat f = checked_format(py::cast(fmt), in, "to_rgb");
    py::array_t<uint8_t> out({int64_t(in.height), int64_t(in.width), int64_t(3)});
    uint8_t* o = out.mutable_data();
    py::gil_scoped_release release;
    convert_image(f, in, o, int64_t(in.width) * 3);
    return out;
}

}  // namespace

void bind_resize(py::module_& m) {
    m.def("resize", &resize_py, py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"),
          py::arg("pass_order"), py::arg("resampler") = Resampler::Pillow,
          "Exact resize (Pillow's, or torch's uint8 antialias with Resampler.TORCH) of a packed uint8\n"
          "(H, W) or (H, W, C <= 4) array to out_w x out_h; returns a new array with src's channel\n"
          "count. Releases the GIL.");
    m.def(
        "resize_rows_read",
        [](const py::array& src, int out_w, int out_h, Filter f, PassOrder o, Resampler rs, int y1) {
            check_resize(out_w, out_h, f, o, rs);
            return Resizer(image_view(src, "resize_rows_read"), out_w, out_h, f, o, rs).source_rows_end(y1);
        },
        py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"), py::arg("pass_order"),
        py::arg("resampler"), py::arg("y1"),
        "n such that resize()'s output rows [0, y1) read only source rows [0, n).");
    m.def("resize_rgb", &resize_rgb_py, py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"),
          py::arg("pass_order"), py::arg("resampler"), py::arg("fmt"),
          "resize() of the packed uint8 image src read in PixelFormat fmt (converted to RGB as run() reads it):\n"
          "a new (out_h, out_w, C) array, C 3, or 4 for an RGB / RGBX source where dropping the pad byte\n"
          "is not free (its 4th channel is then the pad byte resized). Releases the GIL; uses the native\n"
          "thread pool.");
    m.def("to_rgb", &to_rgb_py, py::arg("src"), py::arg("fmt"),
          "The packed uint8 image src read in PixelFormat fmt, converted to a new (H, W, 3) RGB array\n"
          "exactly as run() converts it. Releases the GIL.");
}

}  // namespace smg::bind
