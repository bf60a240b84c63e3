// The only pybind11 file: converts and checks arguments, releases the GIL, and calls plain C++.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>

#include "arrow.hpp"
#include "convert.hpp"
#include "cpu.hpp"
#include "jpeg_decode.hpp"
#include "jpeg_pipeline.hpp"
#include "kernel_log.hpp"
#include "normalize.hpp"
#include "parallel.hpp"
#include "patchify.hpp"
#include "png_unfilter.hpp"
#include "preprocess.hpp"
#include "resample.hpp"
#include "scratch.hpp"
#include "slot_arena.hpp"

#ifndef SMG_FAST_VERSION
#error "SMG_FAST_VERSION must be defined by the build (setup.py reads src/smg_fast/_version.py)"
#endif

namespace py = pybind11;
using namespace smg;

namespace {

constexpr int kMaxSide = 1 << 20;  // far beyond any real image; keeps index math in range

// Validates a uint8 (H, W) or (H, W, C) array with packed pixels and positive row stride.
ImageView image_view(const py::array& a, const char* what) {
    if (!py::isinstance<py::array_t<uint8_t>>(a) || a.dtype().kind() != 'u' || a.itemsize() != 1)
        throw py::type_error(std::string(what) + ": expected a uint8 array");
    if (a.ndim() != 2 && a.ndim() != 3) throw py::value_error(std::string(what) + ": expected shape (H, W) or (H, W, C)");
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

// The enums arrive from Python as any integer (py::enum_ constructs from int), so each is
// checked before it reaches code that switches on it.
void check_resize(int out_w, int out_h, Filter filter, PassOrder order, Resampler rs) {
    if (out_w < 1 || out_h < 1 || out_w > kMaxSide || out_h > kMaxSide)
        throw py::value_error("resize: output size must be positive and at most 2^20 per side");
    if (!is_valid_filter(filter)) throw py::value_error("resize: unknown resampling filter " + std::to_string(int(filter)));
    if (!is_valid_pass_order(order)) throw py::value_error("resize: unknown pass order " + std::to_string(int(order)));
    if (!is_valid_resampler(rs)) throw py::value_error("resize: unknown resampler " + std::to_string(int(rs)));
    if (rs == Resampler::Torch && filter != Filter::Bicubic)
        throw py::value_error("resize: the torch resampler implements BICUBIC only");
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

bool is_bytes(const py::buffer_info& b) { return b.ndim == 1 && b.itemsize == 1 && b.strides[0] == 1; }

py::tuple triple(const double* v) { return py::make_tuple(v[0], v[1], v[2]); }

void make_read_only(py::array& a) { py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_; }

// fmt None: RGB for 3 channels, RGBX for 4 (what run() read before pixel formats existed).
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
    if (!is_valid_format(f)) throw py::value_error(std::string(what) + ": unknown pixel format " + std::to_string(int(f)));
    if (in.channels != format_channels(f))
        throw py::value_error(std::string(what) + ": pixel format " + std::to_string(int(f)) + " reads " +
                              std::to_string(format_channels(f)) + " channels, the image has " +
                              std::to_string(in.channels));
    return f;
}

int run_py(const Pipeline& pl, py::array src, int resize_w, int resize_h, int grid_h, int grid_w, py::array dst,
           int64_t offset, const py::object& fmt, const std::optional<py::buffer>& jpeg, std::optional<py::array> secs) {
    const ImageView in = image_view(src, "run");
    if (jpeg && (fmt.is_none() || fmt.cast<PixelFormat>() != PixelFormat::RGB || !src.writeable()))
        throw py::value_error("run: with jpeg, src must be a writable RGB (H, W, 3) array and fmt RGB");
    if (secs && (!jpeg || !secs->dtype().equal(py::dtype::of<double>()) || secs->size() < 1 || !secs->writeable()))
        throw py::value_error("run: decode_seconds must be a writable float64 array, with jpeg");
    double* decode_s = secs ? static_cast<double*>(secs->mutable_data()) : nullptr;
    const PixelFormat f = checked_format(fmt, in, "run");
    const int esize = dtype_size(pl.dtype());  // bfloat16 travels as its raw bits (uint16)
    if (!dst.dtype().equal(py::dtype(dtype_format(pl.dtype()))) || !(dst.flags() & py::array::c_style) || !dst.writeable())
        throw py::value_error("run: dst must be a writable C-contiguous array of the output dtype");
    const int64_t need = pl.output_elems(resize_w, resize_h, grid_h, grid_w);
    if (offset < 0 || offset > dst.size() || dst.size() - offset < need)
        throw py::value_error("run: dst too small for this image at this offset");
    char* out = static_cast<char*>(dst.mutable_data()) + offset * esize;
    const py::buffer_info b = jpeg ? jpeg->request() : py::buffer_info();
    if (jpeg && !is_bytes(b)) throw py::value_error("run: jpeg must be contiguous bytes");
    auto* img = jpeg ? static_cast<uint8_t*>(src.mutable_data()) : nullptr;
    py::gil_scoped_release release;
    if (!jpeg) { pl.run(in, f, resize_w, resize_h, grid_h, grid_w, out); return int(JpegStatus::Whole); }
    return int(jpeg_decode_run(pl, static_cast<const uint8_t*>(b.ptr), size_t(b.size), img, in.stride, in.width, in.height,
                               resize_w, resize_h, grid_h, grid_w, out, decode_s));
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

void bind_enums(py::module_& m) {
    py::enum_<Filter>(m, "Filter", "Resampling filter; values are Pillow's Image.Resampling values.")
        .value("NEAREST", Filter::Nearest, "Nearest neighbour (Pillow's affine NEAREST path).")
        .value("LANCZOS", Filter::Lanczos, "Lanczos, 3 lobes.")
        .value("BILINEAR", Filter::Bilinear, "Bilinear (triangle) filter.")
        .value("BICUBIC", Filter::Bicubic, "Bicubic, a = -0.5 (what the Qwen and Kimi processors use).")
        .value("BOX", Filter::Box, "Box (area average).")
        .value("HAMMING", Filter::Hamming, "Hamming-windowed sinc.");
    py::enum_<PassOrder>(m, "PassOrder", "Which separable pass runs first; Pillow 13 changed the rule.")
        .value("HORIZONTAL_FIRST", PassOrder::HorizontalFirst, "Pillow <= 12: horizontal, then vertical.")
        .value("PILLOW13", PassOrder::Pillow13, "Pillow 13: vertical first when the height shrinks by more than 2x the width.");
    py::enum_<Resampler>(m, "Resampler", "Whose resize arithmetic is reproduced.")
        .value("PILLOW", Resampler::Pillow, "Pillow's Resample.c (pass order per PassOrder).")
        .value("TORCH", Resampler::Torch,
               "torch's uint8 antialiased interpolate on CPU (torchvision's resize); BICUBIC only,\n"
               "horizontal pass first whatever the PassOrder.");
    py::enum_<PixelFormat>(m, "PixelFormat",
                           "How run() reads a decoded image's bytes; formats other than RGB and RGBX are\n"
                           "converted to RGB row by row while the resampler reads them, with the named\n"
                           "reference's arithmetic.")
        .value("RGB", PixelFormat::RGB, "3 bytes per pixel: R, G, B.")
        .value("RGBX", PixelFormat::RGBX, "4 bytes: R, G, B and one ignored (Pillow's RGB memory; RGBA with alpha dropped).")
        .value("GRAY", PixelFormat::Gray, "1 byte, replicated to R = G = B (Pillow's L -> RGB; np.repeat).")
        .value("GRAY_ALPHA_DROP", PixelFormat::GrayAlphaDrop, "2 bytes (L, A): L replicated, A dropped (Pillow's LA -> RGB).")
        .value("GRAY_ALPHA_OVER_WHITE_PILLOW", PixelFormat::GrayAlphaOverWhitePillow,
               "2 bytes (L, A): LA -> RGBA (L replicated), then RGBA_OVER_WHITE_PILLOW.")
        .value("RGBA_OVER_WHITE_PILLOW", PixelFormat::RgbaOverWhitePillow,
               "4 bytes: Image.alpha_composite(opaque white, rgba).convert('RGB') (Pillow's integer arithmetic).")
        .value("RGBA_OVER_WHITE_NUMPY", PixelFormat::RgbaOverWhiteNumpy,
               "4 bytes: transformers' convert_to_rgb on uint8 arrays: np.round(a / 255 * c + (1 - a / 255) * 255)\n"
               "in float64.")
        .value("RGBA_OVER_WHITE_TORCH", PixelFormat::RgbaOverWhiteTorch,
               "4 bytes: transformers' torchvision backend on uint8 arrays: c * a + (1 - a) in float32 after\n"
               "tvF.to_dtype (u * f32(1 / 255)), back by tvF.to_dtype (times f32(255.999), truncated).");
    py::enum_<DType>(m, "DType", "Output element type.")
        .value("FLOAT32", DType::Float32, "float32.")
        .value("BFLOAT16", DType::BFloat16, "bfloat16 (NumPy arrays hold its bits as uint16).")
        .value("FLOAT16", DType::Float16, "IEEE float16.")
        .value("UINT8", DType::UInt8, "uint8: the resized byte itself, not normalized (patch order only).");
    py::enum_<LutRecipe>(m, "LutRecipe", "The reference's normalization arithmetic, operation for operation.")
        .value("HF_RESCALE_NORMALIZE", LutRecipe::HfRescaleNormalize,
               "transformers' PIL processors: f32(f32(f64(u) * rescale) - f32(mean)) / f32(std).")
        .value("KIMI_DIVIDE_MULTIPLY", LutRecipe::KimiDivideMultiply,
               "Kimi-K2.5 upstream: (f32(f64(u) / 255) - f32(mean)) * f32(1 / f32(std)); rescale unused.")
        .value("TORCH_FUSED_NORMALIZE", LutRecipe::TorchFusedNormalize,
               "transformers' torchvision processors: (f32(u) - M) / S, M = f32(f32(mean) * f32(1 / rescale)),\n"
               "S likewise from std.");
}

void bind_pipeline(py::module_& m) {
    py::class_<Pipeline>(m, "Pipeline",
                         "Resize + normalize + patchify for one processor and output dtype.\n\n"
                         "Everything fixed per processor is validated once here, including the 3 x 256\n"
                         "normalization table and the check that the SIMD kernel reproduces it; run()\n"
                         "then takes only what differs per image. Safe to share between threads.")
        .def(py::init([](LutRecipe recipe, double rescale, std::array<double, 3> mean, std::array<double, 3> std_, DType dtype,
                         Filter filter, PassOrder order, int patch, int merge, int temporal, Resampler resampler) {
                 const NormParams norm{recipe, rescale, {mean[0], mean[1], mean[2]}, {std_[0], std_[1], std_[2]}};
                 return new Pipeline(norm, dtype, filter, order, resampler, patch, merge, temporal);
             }),
             py::kw_only(), py::arg("recipe"), py::arg("rescale"), py::arg("mean"), py::arg("std"), py::arg("dtype"), py::arg("filter"),
             py::arg("pass_order"), py::arg("patch"), py::arg("merge"), py::arg("temporal"), py::arg("resampler") = Resampler::Pillow,
             "Validates and prepares the pipeline. Raises ValueError for an unknown enum value, a filter\n"
             "the resampler does not implement, patch outside 1..64, merge or temporal outside 1..16, a\n"
             "zero or non-finite std, a non-finite mean.")
        .def("run", &run_py, py::arg("src"), py::arg("resize_w"), py::arg("resize_h"), py::arg("grid_h"), py::arg("grid_w"),
             py::arg("dst"), py::arg("offset") = 0, py::kw_only(), py::arg("fmt") = py::none(), py::arg("jpeg") = py::none(), py::arg("decode_seconds") = py::none(),
             "Resizes src (packed uint8 (H, W) or (H, W, C), read in PixelFormat fmt; None: RGB for 3 channels, RGBX\n"
             "for 4) to resize_w x resize_h and writes its grid_h * grid_w patch rows, normalized in the pipeline's\n"
             "dtype, into the flat C-contiguous array dst from element offset on; grid cells past the resized image\n"
             "are padding (pixel value 0). Formats other than RGB / RGBX are converted while read, through small\n"
             "pooled bands. Releases the GIL. jpeg (bytes): src (RGB) is filled by jpeg_decode while the core reads\n"
             "its finished rows; returns jpeg_decode's status (dst valid only for 0; 2 until jpeg_bind succeeded),\n"
             "else 0; with decode_seconds (native float64 array, jpeg only) [0] gets the decode's own CPU time.")
        .def("output_elems", &Pipeline::output_elems, py::arg("resize_w"), py::arg("resize_h"), py::arg("grid_h"), py::arg("grid_w"),
             "Elements run() writes for these sizes; ValueError unless the grid is a positive\n"
             "multiple of merge and the resized image fits inside it.")
        .def_property_readonly("lut", [](py::object self) {
                 const Pipeline& pl = self.cast<const Pipeline&>();
                 py::array out(py::dtype(dtype_format(pl.dtype())), {3, 256}, {}, pl.normalizer().lut(), self);
                 make_read_only(out);
                 return out;
             }, "The read-only 3 x 256 normalization table (float32, or uint16 bits for bfloat16 and\n"
                "float16, uint8 for UINT8), indexed [channel, pixel value]: the definition of every output value.")
        .def_property_readonly("kernel", [](const Pipeline& pl) { return Normalizer::kernel_name(pl.normalizer().kernel_for(pl.patch())); },
             "The patchify kernel chosen at construction for this patch size: 'avx512-fast', 'avx512',\n"
             "'avx2-fast', 'avx2-gather', 'table' (each SIMD form checked against all 768 table values) or 'copy' (uint8).")
        .def_property_readonly("dtype", &Pipeline::dtype, "Output element type.")
        .def_property_readonly("recipe", [](const Pipeline& pl) { return pl.normalizer().params().recipe; }, "Normalization recipe.")
        .def_property_readonly("rescale", [](const Pipeline& pl) { return pl.normalizer().params().rescale; },
             "Rescale factor (HF_RESCALE_NORMALIZE only).")
        .def_property_readonly("mean", [](const Pipeline& pl) { return triple(pl.normalizer().params().mean); }, "Per-channel mean.")
        .def_property_readonly("std", [](const Pipeline& pl) { return triple(pl.normalizer().params().std_); }, "Per-channel std.")
        .def_property_readonly("filter", &Pipeline::filter, "Resampling filter.")
        .def_property_readonly("pass_order", &Pipeline::pass_order, "Resampling pass order.")
        .def_property_readonly("resampler", &Pipeline::resampler, "Whose resize arithmetic.")
        .def_property_readonly("patch", &Pipeline::patch, "Patch side in pixels.")
        .def_property_readonly("merge", &Pipeline::merge, "Merge size (patches per merged block side).")
        .def_property_readonly("temporal", &Pipeline::temporal, "Temporal copies of each patch.")
        .def_property_readonly("row_elems", &Pipeline::row_elems, "Elements per patch row: 3 * temporal * patch^2.");
}

// A (height, width, 4) uint8 view of a Pillow RGB image exported as Arrow (fixed-size lists of 4
// bytes: R, G, B, pad). The view keeps both capsules (and so the exported memory) alive.
py::array arrow_rgbx(const py::capsule& schema_cap, const py::capsule& array_cap, int64_t width, int64_t height) {
    if (std::string(schema_cap.name() ? schema_cap.name() : "") != "arrow_schema" ||
        std::string(array_cap.name() ? array_cap.name() : "") != "arrow_array")
        throw py::value_error("arrow_rgbx: expected arrow_schema and arrow_array capsules");
    const uint8_t* data = arrow_rgbx_pixels(schema_cap.get_pointer<ArrowSchema>(), array_cap.get_pointer<ArrowArray>(),
                                            width, height);
    py::tuple owner = py::make_tuple(schema_cap, array_cap);
    py::array out(py::dtype::of<uint8_t>(), {height, width, int64_t(4)}, {width * 4, int64_t(4), int64_t(1)}, data, owner);
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
        throw py::value_error("jpeg_decode: expected contiguous bytes, a writable packed (H, W, 3) uint8 array, bands 0-2");
    auto* o = static_cast<uint8_t*>(out.mutable_data());
    py::gil_scoped_release release;
    return int(jpeg_decode_rgb(static_cast<const uint8_t*>(b.ptr), size_t(b.size), o, v.stride, v.width, v.height, JpegBands(bands)));
}

// A 1-D uint8 array of n bytes backed by a pooled block; the block goes back to the pool of the
// thread that took it, whichever thread drops the last reference.
py::array pooled_empty(int64_t n, bool zero) {
    if (n < 0) throw py::value_error("pooled_empty: negative size");
    const Block b = [&] { py::gil_scoped_release release; return scratch_take(size_t(n), zero); }();
    py::capsule owner(new Block(b), [](void* p) { auto* blk = static_cast<Block*>(p); scratch_give(*blk); delete blk; });
    return py::array_t<uint8_t>({n}, {1}, static_cast<uint8_t*>(b.data), owner);
}

// Named integers (counters, offsets) as Python ints, so 64-bit unsigned generations keep every bit.
py::dict int_dict(std::initializer_list<std::pair<const char*, py::int_>> items) {
    py::dict d;
    for (const auto& [k, v] : items) d[k] = v;
    return d;
}

py::dict stats_py() {
    const ScratchStats s = scratch_stats();
    return int_dict({{"hits", s.hits}, {"misses", s.misses}, {"gives", s.gives}, {"drops", s.drops}, {"remote_gives", s.remote_gives},
                     {"pooled_bytes", s.pooled_bytes}, {"live_bytes", s.live_bytes}, {"cap_bytes", scratch_cap()},
                     {"total_cap_bytes", scratch_total_cap()}, {"thread_pooled_bytes", scratch_thread_pooled()}});
}

py::object lease_py(const SlotLease& l) {
    if (l.slot < 0) return py::none();
    return int_dict({{"slot", l.slot}, {"generation", l.generation}, {"frame_offset", l.frame_offset}, {"frame_len", l.frame_len},
                     {"payload_offset", l.payload_offset}, {"payload_len", l.payload_len}});
}

void bind_slot_arena(py::module_& m) {
    m.attr("FRAME_HEADER") = kFrameHeader;
    m.attr("FRAME_MAGIC") = kFrameMagic;
    m.attr("FRAME_VERSION") = kFrameVersion;
    m.def("frame_bytes", [](size_t n) { return frame_bytes(n); }, py::arg("payload_len"),
          "Bytes a slot frame with a payload_len-byte payload occupies (header, padded payload, trailer).");
    m.def("key_hash", &key_hash, py::arg("key"), "FNV-1a hash of a lease key, as stored in a frame header.");
    py::class_<SlotArena, std::shared_ptr<SlotArena>>(m, "SlotArena",
                                                      "The RDMA slot arena: one pre-faulted buffer of equal slots leased by key,\n"
                                                      "written in place, committed, and freed by key (or reaped after ttl_s).")
        .def(py::init([](int64_t slots, int64_t slot_bytes, double ttl_s) {
                 if (slots < 1 || slot_bytes < 80 || slot_bytes % 64 != 0 || !(ttl_s > 0))
                     throw py::value_error("SlotArena: need slots >= 1, slot_bytes >= 80 and a "
                                           "multiple of 64, ttl_s > 0");
                 py::gil_scoped_release release;  // pre-faulting the arena takes a while
                 return std::make_shared<SlotArena>(size_t(slots), size_t(slot_bytes), ttl_s);
             }), py::arg("slots"), py::arg("slot_bytes"), py::arg("ttl_s"),
             "Allocates and pre-faults slots * slot_bytes bytes (slot_bytes a multiple of 64, >= 80,\n"
             "frame included); committed leases older than ttl_s seconds are reaped.")
        .def_property_readonly("address", [](const SlotArena& a) { return reinterpret_cast<uintptr_t>(a.data()); },
                               "Base address of the arena (for NIXL registration).")
        .def_property_readonly("size", &SlotArena::size, "Arena bytes: slots * slot_bytes.")
        .def_property_readonly("slots", &SlotArena::slots, "Number of slots.")
        .def_property_readonly("slot_bytes", &SlotArena::slot_bytes, "Bytes per slot, frame included.")
        .def_property_readonly("max_payload", &SlotArena::max_payload, "Largest payload one slot holds.")
        .def_property_readonly("ttl_s", &SlotArena::ttl_s, "Seconds a committed lease lives without a free.")
        .def_property_readonly("in_use", [](const SlotArena& a) { return a.counters().in_use; }, "Slots leased right now.")
        .def("lease", [](SlotArena& a, const std::string& key, int64_t n) {
                 if (n < 0) throw py::value_error("lease: negative size");
                 return lease_py(a.lease(key, size_t(n)));
             }, py::arg("key"), py::arg("payload_len"),
             "Leases a slot for key and writes its header: a dict (slot, generation, frame_offset, frame_len,\n"
             "payload_offset, payload_len), or None when every slot is taken. ValueError when the payload\n"
             "cannot fit a slot or key already holds a lease.")
        .def("commit", &SlotArena::commit, py::arg("key"), "Marks key's payload written, starts its TTL; False if key has no lease.")
        .def("free", &SlotArena::free, py::arg("key"),
             "Releases key's committed slot; False (and counted) for no lease or one still being written.")
        .def("abort", &SlotArena::abort, py::arg("key"), "The writer gives up key's lease, committed or not; False if key holds no lease.")
        .def("reap", &SlotArena::reap, "Releases committed leases older than the TTL; returns how many.")
        .def("reap_after", &SlotArena::reap_after, py::arg("seconds"),
             "Reaps as if seconds had passed (tests the TTL path without sleeping); returns how many.")
        .def("view", [](py::object self, int64_t offset, int64_t n) {
                 auto& a = self.cast<SlotArena&>();
                 if (offset < 0 || n < 0 || size_t(offset) > a.size() || size_t(n) > a.size() - size_t(offset))
                     throw py::value_error("view: range outside the arena");
                 return py::array_t<uint8_t>({n}, {1}, a.data() + offset, self);
             }, py::arg("offset"), py::arg("nbytes"), "A writable uint8 view of nbytes of the arena from offset; it keeps the arena alive.")
        .def("copy_in", [](SlotArena& a, const std::string& key, const py::array& arr) {
                 if (!(arr.flags() & py::array::c_style)) throw py::value_error("copy_in: expected a C-contiguous array");
                 const size_t n = size_t(arr.nbytes());
                 return lease_py([&] { py::gil_scoped_release release; return a.copy_in(key, arr.data(), n); }());
             }, py::arg("key"), py::arg("src"),
             "Leases a slot for key, copies the C-contiguous array src in (thread pool, GIL released)\n"
             "and commits; the lease dict, or None when full.")
        .def("counters", [](const SlotArena& a) {
                 const ArenaCounters c = a.counters();
                 return int_dict({{"leased", c.leased}, {"committed", c.committed}, {"freed", c.freed}, {"reaped", c.reaped},
                                  {"full", c.full}, {"too_large", c.too_large}, {"unknown_free", c.unknown_free},
                                  {"refused_free", c.refused_free}, {"in_use", c.in_use}});
             }, "Lifetime counters: leased, committed, freed, reaped, full, too_large, unknown_free,\n"
                "refused_free, and in_use (slots leased now).");
}

py::dict isa_dict(bool avx2, bool avx512, bool vbmi, bool vnni) {
    return py::dict(py::arg("avx2") = avx2, py::arg("avx512") = avx512, py::arg("avx512vbmi") = vbmi, py::arg("avx512vnni") = vnni);
}

py::dict kernel_info_py() {
    // IsaLevel -> the SMG_FAST_ISA value of that cap.
    static const char* const kLevels[] = {"baseline", "avx2", "avx512-novnni", "avx512"};
    py::dict d;
    d["isa_cap"] = kLevels[isa_cap()];
    d["isa_cap_env"] = isa_cap_env() ? py::object(py::str(isa_cap_env())) : py::object(py::none());
    const HostIsa h = host_isa();
    d["host"] = isa_dict(h.avx2, h.avx512, h.avx512vbmi, h.avx512vnni);
    py::dict selected;
    for (KernelId id : {vertical_kernel(), horizontal_kernel(), patchify_kernel()})
        selected[kernel_desc(id).stage] = kernel_desc(id).name;
    d["selected"] = selected;
    // Every kernel, with the lowest SMG_FAST_ISA cap that admits it and whether it has run.
    py::list kernels;
    const uint32_t ran = g_kernels_ran.load(std::memory_order_relaxed);
    for (int i = 0; i < int(KernelId::Count); ++i) {
        const KernelDesc& k = kernel_desc(KernelId(i));
        kernels.append(py::dict(py::arg("stage") = k.stage, py::arg("name") = k.name,
                                py::arg("min_cap") = kLevels[k.level], py::arg("ran") = bool(ran & (uint32_t(1) << i))));
    }
    d["kernels"] = kernels;
    return d;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "smg-fast native core: Pillow-exact resampling, fused normalize + patchify, pooled buffers,\n"
              "the RDMA slot arena. Plain C++ below this module; see _native.pyi for the types.";
    m.attr("__version__") = SMG_FAST_VERSION;
    bind_enums(m);
    bind_pipeline(m);
    m.def("resize", &resize_py, py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"),
          py::arg("pass_order"), py::arg("resampler") = Resampler::Pillow,
          "Exact resize (Pillow's, or torch's uint8 antialias with Resampler.TORCH) of a packed uint8\n"
          "(H, W) or (H, W, C <= 4) array to out_w x out_h; returns a new array with src's channel\n"
          "count. Releases the GIL.");
    m.def("resize_rows_read", [](const py::array& src, int out_w, int out_h, Filter f, PassOrder o, Resampler rs, int y1) {
              check_resize(out_w, out_h, f, o, rs);
              return Resizer(image_view(src, "resize_rows_read"), out_w, out_h, f, o, rs).source_rows_end(y1);
          }, py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"), py::arg("pass_order"),
          py::arg("resampler"), py::arg("y1"), "n such that resize()'s output rows [0, y1) read only source rows [0, n).");
    m.def("to_rgb", &to_rgb_py, py::arg("src"), py::arg("fmt"),
          "The packed uint8 image src read in PixelFormat fmt, converted to a new (H, W, 3) RGB array\n"
          "exactly as run() converts it. Releases the GIL.");
    m.def("arrow_rgbx", &arrow_rgbx, py::arg("schema"), py::arg("array"), py::arg("width"), py::arg("height"),
          "A read-only (height, width, 4) uint8 view of a Pillow RGB image exported through the Arrow\n"
          "C data interface (its arrow_schema and arrow_array capsules), without a copy.");
    m.def("pooled_empty", &pooled_empty, py::arg("nbytes"), py::arg("zero") = false,
          "A 1-D uint8 array of nbytes from the calling thread's scratch pool (zero-filled if zero);\n"
          "its memory returns to that pool when the array is dropped, from any thread.");
    m.def("png_unfilter", &png_unfilter_py, py::arg("data"), py::arg("height"), py::arg("row_bytes"), py::arg("bpp"),
          "Undoes PNG's row filters in place: height rows of a filter byte and row_bytes bytes, bpp\n"
          "bytes per pixel (ValueError if data is shorter). False at a filter type outside 0-4.");
    m.def("jpeg_bind", [](const std::string& path) { return jpeg_bind(path.c_str()); }, py::arg("path"),
          "Binds jpeg_decode to the libjpeg already loaded from path (Pillow's); '' or why not.");
    m.def("jpeg_decode", &jpeg_decode_py, py::arg("data"), py::arg("out"), py::arg("bands"),
          "JPEG bytes to RGB in out with Pillow's libjpeg settings; bands 0 never, 1 when idle, 2 always.\n"
          "0 whole, 1 banded, 2 not taken, 3 libjpeg error or warning (out partial). No GIL.");
    m.def("scratch_stats", &stats_py, "Counters of the scratch pools (hits, misses, bytes pooled and live, caps).");
    m.def("scratch_release", &scratch_release, "Frees every block pooled by the calling thread.");
    m.def("scratch_set_cap", &scratch_set_cap, py::arg("bytes"), "Per-thread cap on pooled scratch bytes.");
    m.def("scratch_set_total_cap", &scratch_set_total_cap, py::arg("bytes"), "Process-wide cap on pooled scratch bytes (all threads).");
    m.def("set_num_threads", [](int n) { py::gil_scoped_release release; set_num_threads(n); }, py::arg("n"), "Threads the native kernels may use, the caller included (n < 1: every available CPU).");
    m.def("num_threads", &num_threads, "Threads the native kernels may use, the caller included.");
    m.def("available_cpus", &available_cpus, "CPUs this process may run on (its affinity mask).");
    m.def("cpu_features", [] { return isa_dict(cpu_has_avx2(), cpu_has_avx512(), cpu_has_avx512vbmi(), cpu_has_avx512vnni()); },
          "The instruction sets the kernels use, after the SMG_FAST_ISA cap.");
    m.def("kernel_info", &kernel_info_py,
          "The ISA cap in force (SMG_FAST_ISA), what the CPU supports, the kernel each stage's\n"
          "dispatch selects, and every kernel that has run in this process, with the level it needs.");
    bind_slot_arena(m);
}
