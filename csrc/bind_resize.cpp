// The resampler alone (resize, the rows a band reads) and the pixel-format conversion alone.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bind_common.hpp"
#include "convert.hpp"
#include "parallel.hpp"
#include "resample/float_bicubic.hpp"
#include "resample/opencv_cubic.hpp"
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
    std::optional<Resizer> made;
    {
        py::gil_scoped_release release;  // the Resizer may time kernels (tune.hpp)
        made.emplace(in, out_w, out_h, filter, order, rs, /*rgb_out=*/true, f);
    }
    const Resizer& resizer = *made;
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

// torch's float32 bicubic without antialias from a canvas of (rows * cols, C, th, tw) tiles into
// a (C, out_h, out_w) array; both checked before anything is read or written.
void bicubic_float_tiles_py(const py::array& src, int rows, int cols, py::array out) {
    if (!py::isinstance<py::array_t<float>>(src) || !py::isinstance<py::array_t<float>>(out))
        throw py::type_error("bicubic_float_tiles: src and out must be float32 arrays");
    if (src.ndim() != 4 || out.ndim() != 3)
        throw py::value_error("bicubic_float_tiles: src must be (tiles, C, th, tw), out (C, h, w)");
    if (!(src.flags() & py::array::c_style) || !(out.flags() & py::array::c_style) || !out.writeable())
        throw py::value_error("bicubic_float_tiles: src and out must be C-contiguous, out writable");
    const int64_t tiles = src.shape(0), channels = src.shape(1), th = src.shape(2), tw = src.shape(3);
    if (rows < 1 || cols < 1 || tiles != int64_t(rows) * cols)
        throw py::value_error("bicubic_float_tiles: src must hold rows * cols tiles");
    if (channels < 1 || th < 1 || tw < 1 || out.shape(0) != channels || out.shape(1) < 1 || out.shape(2) < 1)
        throw py::value_error("bicubic_float_tiles: out must be (C, h, w) with src's C, sizes positive");
    if (channels > std::numeric_limits<int>::max()) throw py::value_error("bicubic_float_tiles: too many channels");
    if (th * rows > kMaxSide || tw * cols > kMaxSide || out.shape(1) > kMaxSide || out.shape(2) > kMaxSide)
        throw py::value_error("bicubic_float_tiles: sides must be at most 2^20");
    const auto* s = static_cast<const float*>(src.data());
    auto* o = static_cast<float*>(out.mutable_data());
    const int64_t src_n = tiles * channels * th * tw, out_n = channels * out.shape(1) * out.shape(2);
    if (o < s + src_n && s < o + out_n) throw py::value_error("bicubic_float_tiles: out overlaps src");
    const TiledCanvas canvas{s, int(channels), rows, cols, int(th), int(tw)};
    const int oh = int(out.shape(1)), ow = int(out.shape(2));
    py::gil_scoped_release release;
    torch_bicubic_float(canvas, o, oh, ow);
}

// The source of resize_opencv_cubic: a packed uint8 image, or a C-contiguous float32 one.
CubicSource cubic_source(const py::array& src) {
    CubicSource s;
    if (py::isinstance<py::array_t<uint8_t>>(src) && src.dtype().kind() == 'u' && src.itemsize() == 1) {
        const ImageView v = image_view(src, "resize_opencv_cubic");
        s.u8 = v.data;
        s.width = v.width, s.height = v.height, s.channels = v.channels, s.row_stride = v.stride;
        s.pixel_stride = v.channels;
        return s;
    }
    if (!src.dtype().equal(py::dtype::of<float>()))  // native byte order: read as floats here
        throw py::type_error("resize_opencv_cubic: expected a uint8 or float32 array (native byte order)");
    if (src.ndim() != 2 && src.ndim() != 3)
        throw py::value_error("resize_opencv_cubic: expected shape (H, W) or (H, W, C)");
    const int64_t h = src.shape(0), w = src.shape(1), c = src.ndim() == 3 ? src.shape(2) : 1;
    if (h < 1 || w < 1) throw py::value_error("resize_opencv_cubic: empty image");
    if (h > kMaxSide || w > kMaxSide) throw py::value_error("resize_opencv_cubic: image side too large");
    if (c < 1 || c > 4) throw py::value_error("resize_opencv_cubic: expected 1 to 4 channels");
    if (!(src.flags() & py::array::c_style))
        throw py::value_error("resize_opencv_cubic: a float32 array must be C-contiguous");
    s.f32 = static_cast<const float*>(src.data());
    s.width = int(w), s.height = int(h), s.channels = int(c), s.row_stride = w * c;
    s.pixel_stride = int(c);
    return s;
}

py::array resize_opencv_cubic_py(const py::array& src, int out_w, int out_h, const py::object& mean,
                                 const py::object& std, int channels) {
    CubicSource s = cubic_source(src);
    if (channels != 0) {  // the first `channels` of each pixel (RGB of an RGBX view)
        if (channels < 1 || channels > s.channels)
            throw py::value_error("resize_opencv_cubic: channels must be 1 to the array's channel count");
        s.channels = channels;
    }
    if (out_w < 1 || out_h < 1 || out_w > kMaxSide || out_h > kMaxSide)
        throw py::value_error("resize_opencv_cubic: output size must be positive and at most 2^20 per side");
    if (mean.is_none() != std.is_none())
        throw py::value_error("resize_opencv_cubic: give both mean and std, or neither");
    CubicNormalize norm{};
    const bool normalize = !mean.is_none();
    if (normalize) {
        const py::sequence m = mean.cast<py::sequence>(), d = std.cast<py::sequence>();
        if (int(m.size()) != s.channels || int(d.size()) != s.channels)
            throw py::value_error("resize_opencv_cubic: mean and std need one value per channel");
        for (int c = 0; c < s.channels; ++c)
            norm.mean[c] = m[size_t(c)].cast<float>(), norm.std[c] = d[size_t(c)].cast<float>();
    }
    std::vector<py::ssize_t> shape;
    if (normalize)
        shape = {s.channels, out_h, out_w};
    else if (src.ndim() == 3)
        shape = {out_h, out_w, py::ssize_t(s.channels)};
    else
        shape = {out_h, out_w};
    py::array_t<float> out(shape);
    float* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        opencv_cubic_resize(s, out_w, out_h, o, normalize ? &norm : nullptr);
    }
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
        "shape_cache_stats",
        [] {
            const ShapeCacheStats s = shape_cache_stats();
            return int_dict({{"hits", s.hits}, {"misses", s.misses}, {"entries", s.entries}, {"bytes", s.bytes}});
        },
        "Counters of the resizer's shape cache: hits, misses, shapes kept and the bytes they hold.");
    m.def("shape_cache_clear", &shape_cache_clear,
          "Empties the resizer's shape cache (its hit and miss counters go on): the next resize of\n"
          "every shape works out its weights and plans again.");
    m.def(
        "resize_rows_read",
        [](const py::array& src, int out_w, int out_h, Filter f, PassOrder o, Resampler rs, int y1) {
            check_resize(out_w, out_h, f, o, rs);
            const ImageView in = image_view(src, "resize_rows_read");
            py::gil_scoped_release release;  // the Resizer may time kernels (tune.hpp)
            return Resizer(in, out_w, out_h, f, o, rs).source_rows_end(y1);
        },
        py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"), py::arg("pass_order"),
        py::arg("resampler"), py::arg("y1"),
        "n such that resize()'s output rows [0, y1) read only source rows [0, n).");
    m.def("bicubic_float_tiles", &bicubic_float_tiles_py, py::arg("src"), py::arg("rows"), py::arg("cols"),
          py::arg("out"),
          "torch's float32 bicubic resize without antialias (F.interpolate, align_corners=False) of\n"
          "the canvas whose rows x cols tiles src holds ((rows * cols, C, th, tw), row by row) into\n"
          "out ((C, h, w)), bit for bit. Releases the GIL.");
    m.def("resize_opencv_cubic", &resize_opencv_cubic_py, py::arg("src"), py::arg("out_w"), py::arg("out_h"),
          py::arg("mean") = py::none(), py::arg("std") = py::none(), py::arg("channels") = 0,
          "OpenCV's INTER_CUBIC resize (cv::resize without IPP) of a packed uint8 or C-contiguous float32\n"
          "(H, W) or (H, W, C <= 4) array to out_w x out_h, in float32. With mean and std (one per\n"
          "channel) each value v becomes (v / 255 - mean) / std in float32 and the result is\n"
          "channel-first (C, out_h, out_w). channels > 0 reads only the first channels of each pixel.\n"
          "Releases the GIL.");
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
