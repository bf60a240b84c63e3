// What the bind_*.cpp files share (they are the native boundary, the only code that sees
// pybind11): argument checks and conversions, and the bind_* function each file defines.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <initializer_list>
#include <utility>

#include "convert.hpp"
#include "image.hpp"

namespace smg::bind {

namespace py = pybind11;

constexpr int kMaxSide = 1 << 20;  // far beyond any real image; keeps index math in range

// Validates a uint8 (H, W) or (H, W, C) array with packed pixels and positive row stride.
ImageView image_view(const py::array& a, const char* what);

bool is_bytes(const py::buffer_info& b);

void make_read_only(py::array& a);

// fmt None: RGB for 3 channels, RGBX for 4 (what run() read before pixel formats existed).
PixelFormat checked_format(const py::object& fmt, const ImageView& in, const char* what);

// Named integers (counters, offsets) as Python ints, so 64-bit unsigned generations keep every bit.
py::dict int_dict(std::initializer_list<std::pair<const char*, py::int_>> items);

// Each adds its part of the module (bind_module.cpp calls them in this order).
void bind_enums(py::module_& m);       // bind_enums.cpp: Filter, PassOrder, Resampler, PixelFormat, DType, LutRecipe
void bind_pipeline(py::module_& m);    // bind_pipeline.cpp: Pipeline
void bind_resize(py::module_& m);      // bind_resize.cpp: resize, resize_rows_read, resize_opencv_cubic, to_rgb
void bind_decode(py::module_& m);      // bind_decode.cpp: arrow_rgbx, png_unfilter, jpeg_bind, jpeg_decode
void bind_runtime(py::module_& m);     // bind_runtime.cpp: pooled scratch, thread count
void bind_kernels(py::module_& m);     // bind_kernels.cpp: cpu_features, kernel_info
void bind_slot_arena(py::module_& m);  // bind_slot_arena.cpp: SlotArena and its frame constants

}  // namespace smg::bind
