// The only pybind11 file: converts and checks arguments, releases the GIL, and calls plain C++.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "cpu.hpp"
#include "normalize.hpp"
#include "parallel.hpp"
#include "patchify.hpp"
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
    const bool packed = (a.ndim() == 2 || a.strides(2) == 1) && a.strides(1) == c && a.strides(0) >= w * c;
    if (!packed) throw py::value_error(std::string(what) + ": pixels must be packed (use np.ascontiguousarray)");
    return ImageView{static_cast<const uint8_t*>(a.data()), int(w), int(h), int(c), int64_t(a.strides(0))};
}

DType parse_dtype(int d) {
    if (d < 0 || d > 2) throw py::value_error("dtype code must be 0 (float32), 1 (bfloat16) or 2 (float16)");
    return DType(d);
}

PassOrder parse_order(int o) {
    if (o != 0 && o != 1) throw py::value_error("pass_order code must be 0 (horizontal first) or 1 (pillow13)");
    return PassOrder(o);
}

Filter parse_filter(int f) {
    if (!is_valid_filter(f)) throw py::value_error("unknown resampling filter " + std::to_string(f));
    return Filter(f);
}

py::array resize_py(const py::array& src, int out_w, int out_h, int filter, int order) {
    const ImageView in = image_view(src, "resize");
    if (out_w < 1 || out_h < 1 || out_w > kMaxSide || out_h > kMaxSide)
        throw py::value_error("resize: output size must be positive and at most 2^20 per side");
    const Filter f = parse_filter(filter);
    const PassOrder po = parse_order(order);
    std::vector<py::ssize_t> shape{out_h, out_w};
    if (src.ndim() == 3) shape.push_back(in.channels);
    py::array_t<uint8_t> out(shape);
    const MutImageView ov{out.mutable_data(), out_w, out_h, in.channels, int64_t(out_w) * in.channels};
    {
        py::gil_scoped_release release;
        resize(in, ov, f, po);
    }
    return out;
}

py::array build_lut_py(int recipe, double rescale, std::array<double, 3> mean, std::array<double, 3> std_, int dtype) {
    if (recipe != 0 && recipe != 1) throw py::value_error("unknown LUT recipe");
    const DType dt = parse_dtype(dtype);
    py::array out = dt == DType::Float32 ? py::array(py::array_t<float>({3, 256})) : py::array(py::array_t<uint16_t>({3, 256}));
    try {
        build_lut(LutRecipe(recipe), rescale, mean.data(), std_.data(), dt, out.mutable_data());
    } catch (const std::invalid_argument& e) {
        throw py::value_error(e.what());
    }
    return out;
}

// Writes one image's encoder input into dst (a C-contiguous writable array) starting at element
// offset `offset`; dst must hold grid_h * grid_w patch rows from there.
void preprocess_into_py(const py::array& src, int resize_w, int resize_h, int filter, int order,
                        int patch, int merge, int temporal, int grid_h, int grid_w,
                        const py::array& lut, int recipe, double rescale, std::array<double, 3> mean,
                        std::array<double, 3> std_, int dtype, py::array dst, int64_t offset) {
    if (recipe != 0 && recipe != 1) throw py::value_error("unknown LUT recipe");
    const ImageView in = image_view(src, "preprocess");
    if (in.channels != 3 && in.channels != 4)
        throw py::value_error("preprocess: expected an RGB (H, W, 3) or RGBX (H, W, 4) image");
    if (patch < 1 || patch > 64 || merge < 1 || merge > 16 || temporal < 1 || temporal > 16)
        throw py::value_error("preprocess: patch must be 1..64, merge and temporal 1..16");
    if (grid_h < merge || grid_w < merge || grid_h % merge || grid_w % merge)
        throw py::value_error("preprocess: grid must be a positive multiple of merge");
    if (resize_w < 1 || resize_h < 1 || resize_w > int64_t(grid_w) * patch || resize_h > int64_t(grid_h) * patch)
        throw py::value_error("preprocess: resized image must fit inside the patch grid");
    const DType dt = parse_dtype(dtype);
    const int esize = dtype_size(dt);
    if (lut.itemsize() != esize || lut.size() != 3 * 256 || !(lut.flags() & py::array::c_style))
        throw py::value_error("preprocess: lut must be a C-contiguous 3 x 256 table of the output dtype");
    if (dst.itemsize() != esize || !(dst.flags() & py::array::c_style) || !dst.writeable())
        throw py::value_error("preprocess: dst must be a writable C-contiguous array of the output dtype");
    const PatchLayout L{patch, merge, temporal, grid_h, grid_w};
    const int64_t need = int64_t(grid_h) * grid_w * patch_row_elems(L);
    if (offset < 0 || offset > dst.size() || dst.size() - offset < need)
        throw py::value_error("preprocess: dst too small for this image at this offset");
    Normalization norm{lut.data(), LutRecipe(recipe), rescale, {mean[0], mean[1], mean[2]},
                       {std_[0], std_[1], std_[2]}};
    const PreprocessSpec spec{resize_w, resize_h, parse_filter(filter), parse_order(order), L, dt, norm};
    char* out = static_cast<char*>(dst.mutable_data()) + offset * esize;
    py::gil_scoped_release release;
    preprocess(in, spec, out);
}

// The Arrow C data interface (its published ABI), used to read a Pillow image's pixel memory
// without the copy np.asarray(image) makes.
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

// A (height, width, 4) uint8 view of a Pillow RGB image exported as Arrow (fixed-size lists of 4
// bytes: R, G, B, pad). The view keeps both capsules (and so the exported memory) alive.
py::array arrow_rgbx(const py::capsule& schema_cap, const py::capsule& array_cap, int64_t width, int64_t height) {
    if (std::string(schema_cap.name() ? schema_cap.name() : "") != "arrow_schema" ||
        std::string(array_cap.name() ? array_cap.name() : "") != "arrow_array")
        throw py::value_error("arrow_rgbx: expected arrow_schema and arrow_array capsules");
    const auto* schema = schema_cap.get_pointer<ArrowSchema>();
    const auto* array = array_cap.get_pointer<ArrowArray>();
    if (!schema || !array || !schema->release || !array->release || !schema->format)
        throw py::value_error("arrow_rgbx: released or empty Arrow structures");
    if (std::string(schema->format) != "+w:4" || schema->n_children != 1 || !schema->children[0] ||
        std::string(schema->children[0]->format ? schema->children[0]->format : "") != "C")
        throw py::value_error("arrow_rgbx: not a fixed-size list of 4 uint8");
    if (width < 1 || height < 1 || array->length != width * height || array->offset != 0 ||
        array->null_count > 0 || array->n_children != 1 || !array->children[0])
        throw py::value_error("arrow_rgbx: unexpected array layout");
    const ArrowArray* child = array->children[0];
    if (child->n_buffers != 2 || child->offset != 0 || child->length != width * height * 4 || !child->buffers[1])
        throw py::value_error("arrow_rgbx: unexpected pixel buffer");
    const auto* data = static_cast<const uint8_t*>(child->buffers[1]);
    py::tuple owner = py::make_tuple(schema_cap, array_cap);
    py::array out(py::dtype::of<uint8_t>(), {height, width, int64_t(4)}, {width * 4, int64_t(4), int64_t(1)}, data, owner);
    py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return out;
}

// A 1-D uint8 array of n bytes backed by a pooled block; the block goes back to the pool of the
// thread that took it, whichever thread drops the last reference.
py::array pooled_empty(int64_t n, bool zero) {
    if (n < 0) throw py::value_error("pooled_empty: negative size");
    Block b;
    {
        py::gil_scoped_release release;
        b = scratch_take(size_t(n), zero);
    }
    auto* holder = new Block(b);
    py::capsule owner(holder, [](void* p) {
        auto* blk = static_cast<Block*>(p);
        scratch_give(*blk);
        delete blk;
    });
    return py::array_t<uint8_t>({n}, {1}, static_cast<uint8_t*>(b.data), owner);
}

py::dict stats_py() {
    const ScratchStats s = scratch_stats();
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["gives"] = s.gives;
    d["drops"] = s.drops;
    d["remote_gives"] = s.remote_gives;
    d["pooled_bytes"] = s.pooled_bytes;
    d["live_bytes"] = s.live_bytes;
    d["cap_bytes"] = scratch_cap();
    d["total_cap_bytes"] = scratch_total_cap();
    d["thread_pooled_bytes"] = scratch_thread_pooled();
    return d;
}


py::object lease_py(const SlotLease& l) {
    if (l.slot < 0) return py::none();
    py::dict d;
    d["slot"] = l.slot;
    d["generation"] = l.generation;
    d["frame_offset"] = l.frame_offset;
    d["frame_len"] = l.frame_len;
    d["payload_offset"] = l.payload_offset;
    d["payload_len"] = l.payload_len;
    return d;
}

void bind_slot_arena(py::module_& m) {
    m.attr("FRAME_HEADER") = kFrameHeader;
    m.attr("FRAME_MAGIC") = kFrameMagic;
    m.attr("FRAME_VERSION") = kFrameVersion;
    m.def("frame_bytes", [](size_t n) { return frame_bytes(n); }, py::arg("payload_len"));
    m.def("key_hash", &key_hash, py::arg("key"));
    py::class_<SlotArena, std::shared_ptr<SlotArena>>(m, "SlotArena")
        .def(py::init([](int64_t slots, int64_t slot_bytes, double ttl_s) {
                 if (slots < 1 || slot_bytes < 80 || slot_bytes % 64 != 0 || !(ttl_s > 0))
                     throw py::value_error("SlotArena: need slots >= 1, slot_bytes >= 80 and a "
                                           "multiple of 64, ttl_s > 0");
                 py::gil_scoped_release release;  // pre-faulting the arena takes a while
                 return std::make_shared<SlotArena>(size_t(slots), size_t(slot_bytes), ttl_s);
             }),
             py::arg("slots"), py::arg("slot_bytes"), py::arg("ttl_s"))
        .def_property_readonly("address", [](const SlotArena& a) { return reinterpret_cast<uintptr_t>(a.data()); })
        .def_property_readonly("size", &SlotArena::size)
        .def_property_readonly("slots", &SlotArena::slots)
        .def_property_readonly("slot_bytes", &SlotArena::slot_bytes)
        .def_property_readonly("max_payload", &SlotArena::max_payload)
        .def_property_readonly("ttl_s", &SlotArena::ttl_s)
        .def_property_readonly("in_use", [](const SlotArena& a) { return a.counters().in_use; })
        .def("lease", [](SlotArena& a, const std::string& key, int64_t n) {
                 if (n < 0) throw py::value_error("lease: negative size");
                 return lease_py(a.lease(key, size_t(n)));
             }, py::arg("key"), py::arg("payload_len"))
        .def("commit", &SlotArena::commit, py::arg("key"))
        .def("free", &SlotArena::free, py::arg("key"))
        .def("abort", &SlotArena::abort, py::arg("key"))
        .def("reap", &SlotArena::reap)
        .def("reap_after", &SlotArena::reap_after, py::arg("seconds"))
        .def("view", [](py::object self, int64_t offset, int64_t n) {
                 auto& a = self.cast<SlotArena&>();
                 if (offset < 0 || n < 0 || size_t(offset) > a.size() || size_t(n) > a.size() - size_t(offset))
                     throw py::value_error("view: range outside the arena");
                 return py::array_t<uint8_t>({n}, {1}, a.data() + offset, self);
             }, py::arg("offset"), py::arg("nbytes"))
        .def("copy_in", [](SlotArena& a, const std::string& key, const py::array& arr) {
                 if (!(arr.flags() & py::array::c_style))
                     throw py::value_error("copy_in: expected a C-contiguous array");
                 const size_t n = size_t(arr.nbytes());
                 SlotLease l;
                 {
                     py::gil_scoped_release release;
                     l = a.copy_in(key, arr.data(), n);
                 }
                 return lease_py(l);
             }, py::arg("key"), py::arg("src"))
        .def("counters", [](const SlotArena& a) {
                 const ArenaCounters c = a.counters();
                 py::dict d;
                 d["leased"] = c.leased;
                 d["committed"] = c.committed;
                 d["freed"] = c.freed;
                 d["reaped"] = c.reaped;
                 d["full"] = c.full;
                 d["too_large"] = c.too_large;
                 d["unknown_free"] = c.unknown_free;
                 d["refused_free"] = c.refused_free;
                 d["in_use"] = c.in_use;
                 return d;
             });
}

}  // namespace

PYBIND11_MODULE(_native, m) {
    m.doc() = "smg-fast native core (Pillow-exact resampling, fused normalize + patchify)";
    m.attr("__version__") = SMG_FAST_VERSION;
    m.def("resize", &resize_py, py::arg("src"), py::arg("out_w"), py::arg("out_h"), py::arg("filter"),
          py::arg("pass_order"));
    m.def("build_lut", &build_lut_py, py::arg("recipe"), py::arg("rescale"), py::arg("mean"), py::arg("std"),
          py::arg("dtype"));
    m.def("preprocess_into", &preprocess_into_py, py::arg("src"), py::arg("resize_w"), py::arg("resize_h"),
          py::arg("filter"), py::arg("pass_order"), py::arg("patch"), py::arg("merge"), py::arg("temporal"),
          py::arg("grid_h"), py::arg("grid_w"), py::arg("lut"), py::arg("recipe"), py::arg("rescale"),
          py::arg("mean"), py::arg("std"), py::arg("dtype"), py::arg("dst"),
          py::arg("offset"));
    m.def("arrow_rgbx", &arrow_rgbx, py::arg("schema"), py::arg("array"), py::arg("width"), py::arg("height"));
    m.def("pooled_empty", &pooled_empty, py::arg("nbytes"), py::arg("zero") = false);
    m.def("scratch_stats", &stats_py);
    m.def("scratch_release", &scratch_release);
    m.def("scratch_set_cap", &scratch_set_cap, py::arg("bytes"));
    m.def("scratch_set_total_cap", &scratch_set_total_cap, py::arg("bytes"),
          "Process-wide cap on pooled scratch bytes (all threads together).");
    m.def("set_num_threads", [](int n) {
        py::gil_scoped_release release;
        set_num_threads(n);
    }, py::arg("n"));
    m.def("num_threads", &num_threads);
    m.def("available_cpus", &available_cpus);
    m.def("cpu_features", [] {
        py::dict d;
        d["avx2"] = cpu_has_avx2();
        d["avx512"] = cpu_has_avx512();
        d["avx512vbmi"] = cpu_has_avx512vbmi();
        d["avx512vnni"] = cpu_has_avx512vnni();
        return d;
    });
    bind_slot_arena(m);
}
