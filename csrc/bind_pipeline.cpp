// Pipeline: one validated processor and dtype; run() checks its destination before the GIL is
// released and anything is written.
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <string>

#include "bind_common.hpp"
#include "decode/jpeg.hpp"
#include "decode/jpeg_pipeline.hpp"
#include "expand/expand.hpp"
#include "normalize/lut.hpp"
#include "patchify/layout.hpp"
#include "pipeline.hpp"
#include "planar.hpp"

namespace smg::bind {

namespace {

py::tuple triple(const double* v) { return py::make_tuple(v[0], v[1], v[2]); }

int run_py(const Pipeline& pl, py::array src, int resize_w, int resize_h, int grid_h, int grid_w, py::array dst,
           int64_t offset, const py::object& fmt, const std::optional<py::buffer>& jpeg, std::optional<py::array> secs,
           int left, int top, int slot, int slots) {
    const ImageView in = image_view(src, "run");
    if (jpeg && (left || top)) throw py::value_error("run: jpeg takes no placement (left, top)");
    if ((slot != 0 || slots != 1) && (jpeg || left || top))
        throw py::value_error("run: a temporal slot takes no jpeg and no placement (left, top)");
    if (slots < 1 || slots > 16 || slot < 0 || slot >= slots)
        throw py::value_error("run: slot must lie in [0, slots) and slots in 1..16");
    if (jpeg && (fmt.is_none() || fmt.cast<PixelFormat>() != PixelFormat::RGB || !src.writeable()))
        throw py::value_error("run: with jpeg, src must be a writable RGB (H, W, 3) array and fmt RGB");
    if (secs && (!jpeg || !secs->dtype().equal(py::dtype::of<double>()) || secs->size() < 1 || !secs->writeable()))
        throw py::value_error("run: decode_seconds must be a writable float64 array, with jpeg");
    double* decode_s = secs ? static_cast<double*>(secs->mutable_data()) : nullptr;
    const PixelFormat f = checked_format(fmt, in, "run");
    const int esize = dtype_size(pl.dtype());  // bfloat16 travels as its raw bits (uint16)
    if (!dst.dtype().equal(py::dtype(dtype_format(pl.dtype()))) || !(dst.flags() & py::array::c_style) ||
        !dst.writeable())
        throw py::value_error("run: dst must be a writable C-contiguous array of the output dtype");
    const int64_t need = pl.output_elems(resize_w, resize_h, grid_h, grid_w) * slots;
    if (offset < 0 || offset > dst.size() || dst.size() - offset < need)
        throw py::value_error("run: dst too small for this image at this offset");
    char* out = static_cast<char*>(dst.mutable_data()) + offset * esize;
    const py::buffer_info b = jpeg ? jpeg->request() : py::buffer_info();
    if (jpeg && !is_bytes(b)) throw py::value_error("run: jpeg must be contiguous bytes");
    auto* img = jpeg ? static_cast<uint8_t*>(src.mutable_data()) : nullptr;
    py::gil_scoped_release release;
    if (slots > 1) {
        pl.run_slot(in, f, resize_w, resize_h, grid_h, grid_w, slot, slots, out);
        return int(JpegStatus::Whole);
    }
    if (!jpeg) {
        pl.run_placed(in, f, resize_w, resize_h, left, top, grid_h, grid_w, out);
        return int(JpegStatus::Whole);
    }
    return int(jpeg_decode_run(pl, static_cast<const uint8_t*>(b.ptr), size_t(b.size), img, in.stride, in.width,
                               in.height, resize_w, resize_h, grid_h, grid_w, out, decode_s));
}

void patches_to_planar_py(const py::array& patches, int grid_h, int grid_w, int patch, py::array dst, int64_t offset,
                          int64_t canvas_h, int64_t canvas_w) {
    if (grid_h < 1 || grid_w < 1 || patch < 1 || patch > kMaxImagePatch || canvas_h > kMaxSide || canvas_w > kMaxSide ||
        canvas_h < int64_t(grid_h) * patch || canvas_w < int64_t(grid_w) * patch)
        throw py::value_error(
            "patches_to_planar: grid and patch must be positive, the canvas (at most 2^20 per side) at least "
            "the grid's pixels");
    const char kind = patches.dtype().kind();  // an object array's items are counted references
    if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f')
        throw py::type_error("patches_to_planar: patches must be an array of numbers (bool, int, float)");
    const auto esize = patches.itemsize();
    if (!(patches.flags() & py::array::c_style) || patches.size() != int64_t(grid_h) * grid_w * 3 * patch * patch)
        throw py::value_error(
            "patches_to_planar: patches must be C-contiguous, grid_h * grid_w * 3 * patch^2 elements");
    if (!dst.dtype().equal(patches.dtype()) || !(dst.flags() & py::array::c_style) || !dst.writeable())
        throw py::value_error("patches_to_planar: dst must be a writable C-contiguous array of patches' dtype");
    const int64_t need = 3 * canvas_h * canvas_w;
    if (offset < 0 || offset > dst.size() || dst.size() - offset < need)
        throw py::value_error("patches_to_planar: dst too small for the canvas at this offset");
    const auto* in = static_cast<const char*>(patches.data());
    char* out = static_cast<char*>(dst.mutable_data()) + offset * esize;
    if (in < out + need * esize && out < in + patches.size() * esize)
        throw py::value_error("patches_to_planar: patches and dst overlap");
    py::gil_scoped_release release;
    patches_to_planar(in, grid_h, grid_w, patch, int(esize), out, canvas_h, canvas_w);
}

void expand_lut_py(const py::array& codes, const py::array& lut, int64_t run, py::array out) {
    if (!codes.dtype().equal(py::dtype::of<uint8_t>()) || !(codes.flags() & py::array::c_style))
        throw py::value_error("expand_lut: codes must be a C-contiguous uint8 array");
    const auto esize = lut.itemsize();
    if ((esize != 2 && esize != 4) || lut.size() != 3 * 256 || !(lut.flags() & py::array::c_style))
        throw py::value_error("expand_lut: lut must be a C-contiguous 3 x 256 array of 2- or 4-byte elements");
    if (out.itemsize() != esize || !(out.flags() & py::array::c_style) || !out.writeable() ||
        out.size() != codes.size())
        throw py::value_error("expand_lut: out must be a writable C-contiguous array like lut, codes.size elements");
    const int64_t n = codes.size();
    if (run < 1 || (n > 0 && (run > n / 3 || n % (3 * run) != 0)))  // run <= n / 3: 3 * run fits
        throw py::value_error("expand_lut: run must be positive and codes.size a multiple of 3 * run");
    const auto* c = static_cast<const uint8_t*>(codes.data());
    const auto* t = static_cast<const char*>(lut.data());
    auto* o = static_cast<char*>(out.mutable_data());
    const auto overlaps = [&](const char* p, int64_t bytes) { return p < o + n * esize && o < p + bytes; };
    if (n > 0 && (overlaps(reinterpret_cast<const char*>(c), n) || overlaps(t, 3 * 256 * esize)))
        throw py::value_error("expand_lut: out overlaps codes or lut");
    py::gil_scoped_release release;
    expand_lut(c, n, run, t, int(esize), o);
}

}  // namespace

void bind_pipeline(py::module_& m) {
    m.def("expand_lut", &expand_lut_py, py::arg("codes"), py::arg("lut"), py::arg("run"), py::arg("out"),
          "Writes out[i] = lut[(i // run) % 3, codes[i]]: the compact format (uint8 codes in the patch layout,\n"
          "runs of `run` elements per channel) back to the table's values. lut: 3 x 256 of 2- or 4-byte\n"
          "elements (a Pipeline's lut); out: as many elements as codes, of lut's item size. Releases the GIL;\n"
          "uses the native thread pool.");
    m.def("patches_to_planar", &patches_to_planar_py, py::arg("patches"), py::arg("grid_h"), py::arg("grid_w"),
          py::arg("patch"), py::arg("dst"), py::arg("offset"), py::arg("canvas_h"), py::arg("canvas_w"),
          "Lays a Pipeline's row-major grid_h x grid_w channel-first patches (merge 1, temporal 1) out as\n"
          "one channel-first image (3, canvas_h, canvas_w) in the flat C-contiguous array dst from element\n"
          "offset on: the grid's pixels at the top left, every other value zero. dst has patches' dtype and\n"
          "does not overlap them. Releases the GIL; uses the native thread pool.");
    py::class_<Pipeline>(m, "Pipeline",
                         "Resize + normalize + patchify for one processor and output dtype.\n\n"
                         "Everything fixed per processor is validated once here, including the 3 x 256\n"
                         "normalization table and the check that the SIMD kernel reproduces it; run()\n"
                         "then takes only what differs per image. Safe to share between threads.")
        .def(py::init([](LutRecipe recipe, double rescale, std::array<double, 3> mean, std::array<double, 3> std_,
                         DType dtype, Filter filter, PassOrder order, int patch, int merge, int temporal,
                         Resampler resampler, PatchOrder patch_order) {
                 const NormParams norm{recipe, rescale, {mean[0], mean[1], mean[2]}, {std_[0], std_[1], std_[2]}};
                 return new Pipeline(norm, dtype, filter, order, resampler, patch, merge, temporal, patch_order);
             }),
             py::kw_only(), py::arg("recipe"), py::arg("rescale"), py::arg("mean"), py::arg("std"), py::arg("dtype"),
             py::arg("filter"), py::arg("pass_order"), py::arg("patch"), py::arg("merge"), py::arg("temporal"),
             py::arg("resampler") = Resampler::Pillow, py::arg("patch_order") = PatchOrder::ChannelFirst,
             "Validates and prepares the pipeline. Raises ValueError for an unknown enum value, a filter\n"
             "the resampler does not implement, patch outside 1..64 (1..4096 with merge and temporal 1: one\n"
             "patch per whole channel-first image), merge or temporal outside 1..16, CHANNELS_LAST with merge or\n"
             "temporal other than 1, a zero or non-finite std, a non-finite mean.")
        .def("run", &run_py, py::arg("src"), py::arg("resize_w"), py::arg("resize_h"), py::arg("grid_h"),
             py::arg("grid_w"), py::arg("dst"), py::arg("offset") = 0, py::kw_only(), py::arg("fmt") = py::none(),
             py::arg("jpeg") = py::none(), py::arg("decode_seconds") = py::none(), py::arg("left") = 0,
             py::arg("top") = 0, py::arg("slot") = 0, py::arg("slots") = 1,
             "Resizes src (packed uint8 (H, W) or (H, W, C), read in PixelFormat fmt; None: RGB for 3 channels, RGBX\n"
             "for 4) to resize_w x resize_h and writes its grid_h * grid_w patch rows, normalized in the pipeline's\n"
             "dtype, into the flat C-contiguous array dst from element offset on; grid cells past the resized image\n"
             "are padding (pixel value 0); left / top place the resized image that far into the grid's canvas (the\n"
             "canvas around it padding too; not with jpeg). Formats other than RGB / RGBX are converted while read, "
             "through small\n"
             "pooled bands. Releases the GIL. jpeg (bytes): src (RGB) is filled by jpeg_decode while the core reads\n"
             "its finished rows; returns jpeg_decode's status (dst valid only for 0; 2 until jpeg_bind succeeded),\n"
             "else 0; with decode_seconds (native float64 array, jpeg only) [0] gets the decode's own CPU time.\n"
             "slot / slots (a temporal-1 channel-first pipeline; no jpeg, no placement): the image is frame slot of\n"
             "a video's temporal group, written into patch rows of slots frames each ((3, slots, P * P)), the other\n"
             "frames' places untouched; dst then holds slots times the elements from offset on.")
        .def("output_elems", &Pipeline::output_elems, py::arg("resize_w"), py::arg("resize_h"), py::arg("grid_h"),
             py::arg("grid_w"),
             "Elements run() writes for these sizes; ValueError unless the grid is a positive\n"
             "multiple of merge and the resized image fits inside it.")
        .def_property_readonly(
            "lut",
            [](py::object self) {
                const Pipeline& pl = self.cast<const Pipeline&>();
                py::array out(py::dtype(dtype_format(pl.dtype())), {3, 256}, {}, pl.normalizer().lut(), self);
                make_read_only(out);
                return out;
            },
            "The read-only 3 x 256 normalization table (float32, or uint16 bits for bfloat16 and\n"
            "float16, uint8 for UINT8), indexed [channel, pixel value]: the definition of every output value.")
        .def_property_readonly(
            "kernel",
            [](const Pipeline& pl) {
                return pl.normalizer().kernel_label(pl.patch(), pl.merge(), pl.temporal(), pl.patch_order());
            },
            "The patchify kernel this pipeline's patches use (tuned on first use unless SMG_FAST_TUNE=0): "
            "'avx512-fast', 'avx512',\n"
            "'avx2-fast', 'avx2-gather', 'table' (each SIMD form checked against all 768 table values) or 'copy' "
            "(uint8); channel-last patches: 'avx512-fast', 'avx512', 'table' or 'copy'.")
        .def_property_readonly(
            "fixed_kernel",
            [](const Pipeline& pl) {
                return pl.normalizer().kernel_label(pl.patch(), pl.merge(), pl.temporal(), pl.patch_order(), false);
            },
            "The patchify kernel the dispatch table's fixed order picks for this pipeline (the one\n"
            "SMG_FAST_TUNE=0 runs); same names as kernel.")
        .def_property_readonly("dtype", &Pipeline::dtype, "Output element type.")
        .def_property_readonly(
            "recipe", [](const Pipeline& pl) { return pl.normalizer().params().recipe; }, "Normalization recipe.")
        .def_property_readonly(
            "rescale", [](const Pipeline& pl) { return pl.normalizer().params().rescale; },
            "Rescale factor (HF_RESCALE_NORMALIZE only).")
        .def_property_readonly(
            "mean", [](const Pipeline& pl) { return triple(pl.normalizer().params().mean); }, "Per-channel mean.")
        .def_property_readonly(
            "std", [](const Pipeline& pl) { return triple(pl.normalizer().params().std_); }, "Per-channel std.")
        .def_property_readonly("filter", &Pipeline::filter, "Resampling filter.")
        .def_property_readonly("pass_order", &Pipeline::pass_order, "Resampling pass order.")
        .def_property_readonly("resampler", &Pipeline::resampler, "Whose resize arithmetic.")
        .def_property_readonly("patch", &Pipeline::patch, "Patch side in pixels.")
        .def_property_readonly("merge", &Pipeline::merge, "Merge size (patches per merged block side).")
        .def_property_readonly("temporal", &Pipeline::temporal, "Temporal copies of each patch.")
        .def_property_readonly("patch_order", &Pipeline::patch_order, "Where a patch's values go in its row.")
        .def_property_readonly("row_elems", &Pipeline::row_elems, "Elements per patch row: 3 * temporal * patch^2.");
}

}  // namespace smg::bind
