#include "decode/jpeg.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "parallel.hpp"

// jconfig.h too: a cross compiler may see the host's jpeglib.h but not its arch's jconfig.h.
// Only the 6.2 API (libjpeg62-turbo-dev): the one Pillow's wheels and Debian's libjpeg.so.62
// implement; libjpeg 8/9 headers (Ubuntu's libjpeg-dev) describe another struct layout.
#if __has_include(<jpeglib.h>) && __has_include(<jconfig.h>)
#include <dlfcn.h>

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE declared first

#include <jpeglib.h>
#if JPEG_LIB_VERSION == 62
#define SMG_FAST_HAVE_JPEGLIB 1
#endif
#endif

namespace smg {

#ifndef SMG_FAST_HAVE_JPEGLIB

std::string jpeg_bind(const char*) {
    return "built without the libjpeg 6.2 API's jpeglib.h (Debian: libjpeg62-turbo-dev)";
}
JpegStatus jpeg_decode_rgb(const uint8_t*, size_t, uint8_t*, ptrdiff_t, int, int, JpegBands, RowGate*) {
    return JpegStatus::Declined;
}

#else

namespace {

// The entry points, taken from the loaded library (declared by jpeglib.h, never linked).
struct Lib {
    decltype(&jpeg_std_error) std_error;
    decltype(&jpeg_CreateDecompress) create;
    decltype(&jpeg_destroy_decompress) destroy;
    decltype(&jpeg_mem_src) mem_src;
    decltype(&jpeg_read_header) read_header;
    decltype(&jpeg_has_multiple_scans) multiple_scans;
    decltype(&jpeg_start_decompress) start;
    decltype(&jpeg_read_scanlines) read_scanlines;
    decltype(&jpeg_skip_scanlines) skip_scanlines;
    decltype(&jpeg_finish_decompress) finish;
};

Lib g_lib;
std::atomic<bool> g_bound{false};
std::mutex g_bind_mu;

struct ErrorMgr {
    jpeg_error_mgr pub;
    jmp_buf jump;
};

// libjpeg reports a fatal error by calling error_exit, which must not return: jump back to the
// guarded() frame that made the call. Warnings are counted in pub.num_warnings, never printed.
void error_exit(j_common_ptr c) { longjmp(reinterpret_cast<ErrorMgr*>(c->err)->jump, 1); }
void no_output(j_common_ptr) {}

// One decompressor. Zero-initialised, so destroying it is safe at any stage.
struct Decoder {
    jpeg_decompress_struct cinfo{};
    ErrorMgr err{};
    bool created = false;
    ~Decoder() {
        if (created) g_lib.destroy(&cinfo);
    }
};

// Every libjpeg call runs inside guarded(): a longjmp from error_exit lands here. The steps are
// plain functions holding no C++ objects with destructors, so the jump skips nothing.
using Step = void (*)(Decoder&, void*);
bool guarded(Decoder& d, Step step, void* arg) {
    if (setjmp(d.err.jump)) return false;
    step(d, arg);
    return true;
}

struct Source {
    const uint8_t* data;
    size_t size;
    int width, height;
    JpegStatus declined_why = JpegStatus::Whole;
    bool multi_scan = false;  // progressive, or several sequential scans
};

// Reads the header and starts decompression with Pillow's settings. Declines (sets
// declined_why) what Pillow decodes differently or this path does not take.
void open_step(Decoder& d, void* arg) {
    auto& src = *static_cast<Source*>(arg);
    d.created = true;
    g_lib.create(&d.cinfo, JPEG_LIB_VERSION, sizeof(jpeg_decompress_struct));
    g_lib.mem_src(&d.cinfo, src.data, static_cast<unsigned long>(src.size));
    g_lib.read_header(&d.cinfo, TRUE);
    src.multi_scan = g_lib.multiple_scans(&d.cinfo);
    jpeg_decompress_struct& c = d.cinfo;
    const bool colour_ok = (c.jpeg_color_space == JCS_YCbCr && c.num_components == 3) ||
                           (c.jpeg_color_space == JCS_RGB && c.num_components == 3) ||
                           (c.jpeg_color_space == JCS_GRAYSCALE && c.num_components == 1);
    // Arithmetic coding: Pillow feeds libjpeg in blocks and its arithmetic decoder cannot
    // suspend, so Pillow's result there depends on the file's size (the Python side also routes
    // these to Pillow before calling here).
    if (!colour_ok || c.arith_code || c.data_precision != 8 || int64_t(c.image_width) != src.width ||
        int64_t(c.image_height) != src.height) {
        src.declined_why = JpegStatus::Declined;
        return;
    }
    c.out_color_space = JCS_RGB;
    c.dct_method = JDCT_ISLOW;
    c.do_fancy_upsampling = TRUE;
    g_lib.start(&c);
    if (int64_t(c.output_width) != src.width || int64_t(c.output_height) != src.height || c.output_components != 3)
        src.declined_why = JpegStatus::Declined;
}

struct Rows {
    uint8_t* out;  // row y0's destination
    ptrdiff_t stride;
    JDIMENSION y0, y1;  // rows [y0, y1) go to out; rows before y0 (from the current scanline) are dropped
    uint8_t* drop;      // one row of scratch for dropped rows
    RowGate* gate;      // told each batch of rows written (y0 == 0 only)
};

void read_step(Decoder& d, void* arg) {
    auto& r = *static_cast<Rows*>(arg);
    jpeg_decompress_struct& c = d.cinfo;
    JSAMPROW rows[16];
    while (c.output_scanline < r.y1) {
        const JDIMENSION y = c.output_scanline;
        JDIMENSION n = 0;
        if (y < r.y0) {
            rows[n++] = r.drop;
        } else {
            for (; n < 16 && y + n < r.y1; ++n) rows[n] = r.out + ptrdiff_t(y + n - r.y0) * r.stride;
        }
        if (g_lib.read_scanlines(&c, rows, n) == 0) longjmp(d.err.jump, 1);  // suspended: no data
        if (r.gate) r.gate->publish(int(c.output_scanline));
    }
}

void skip_step(Decoder& d, void* arg) {
    const JDIMENSION n = *static_cast<JDIMENSION*>(arg);
    if (g_lib.skip_scanlines(&d.cinfo, n) != n) longjmp(d.err.jump, 1);
}

void finish_step(Decoder& d, void*) { g_lib.finish(&d.cinfo); }

// Errors jump back to guarded(); messages are never printed.
void init_errors(Decoder& d) {
    d.cinfo.err = g_lib.std_error(&d.err.pub);
    d.err.pub.error_exit = error_exit;
    d.err.pub.output_message = no_output;
}

JpegStatus open(Decoder& d, Source& src) {
    init_errors(d);
    if (!guarded(d, open_step, &src)) return JpegStatus::Failed;
    return src.declined_why;
}

JpegStatus verdict(const Decoder& d, bool ok) {
    return ok && d.err.pub.num_warnings == 0 ? JpegStatus::Whole : JpegStatus::Failed;
}

constexpr int64_t kMinBandedPixels = 512 * 512;

// Output rows per iMCU row (the 6.2 ABI's min_DCT_scaled_size: 8 when not scaling).
JDIMENSION imcu_rows(const jpeg_decompress_struct& c) {
    return JDIMENSION(c.max_v_samp_factor) * JDIMENSION(c.min_DCT_scaled_size);
}

// Rows [y0, y1) of an image whose decoder `d` is open at scanline 0. y0 > 0: skip to one iMCU
// row before y0 (the upsampler's context), decode and drop up to y0. y1 == height: finish the
// file (so trailing corruption is reported as a whole decode reports it).
JpegStatus decode_band(Decoder& d, uint8_t* out, ptrdiff_t stride, JDIMENSION y0, JDIMENSION y1,
                       RowGate* gate = nullptr) {
    jpeg_decompress_struct& c = d.cinfo;
    std::vector<uint8_t> drop(size_t(c.output_width) * 3);
    if (y0 > 0) {
        const JDIMENSION imcu = imcu_rows(c);
        JDIMENSION skip = y0 >= 2 * imcu ? (y0 / imcu - 1) * imcu : 0;
        if (skip > 0 && !guarded(d, skip_step, &skip)) return JpegStatus::Failed;
    }
    Rows rows{out, stride, y0, y1, drop.data(), y0 == 0 ? gate : nullptr};
    if (!guarded(d, read_step, &rows)) return JpegStatus::Failed;
    const bool ok = y1 < c.output_height || guarded(d, finish_step, nullptr);
    return verdict(d, ok);
}

}  // namespace

std::string jpeg_bind(const char* path) {
    std::lock_guard<std::mutex> lk(g_bind_mu);
    if (g_bound.load()) return "";
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // only a library already loaded
    if (!h) return std::string("not loaded in this process: ") + path;
    Lib lib{};
    const auto get = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)> >(dlsym(h, name));
        return fn != nullptr;
    };
    if (!(get(lib.std_error, "jpeg_std_error") && get(lib.create, "jpeg_CreateDecompress") &&
          get(lib.destroy, "jpeg_destroy_decompress") && get(lib.mem_src, "jpeg_mem_src") &&
          get(lib.read_header, "jpeg_read_header") && get(lib.multiple_scans, "jpeg_has_multiple_scans") &&
          get(lib.start, "jpeg_start_decompress") && get(lib.read_scanlines, "jpeg_read_scanlines") &&
          get(lib.skip_scanlines, "jpeg_skip_scanlines") && get(lib.finish, "jpeg_finish_decompress")))
        return std::string("a libjpeg entry point is missing in ") + path;
    g_lib = lib;
    // The library checks JPEG_LIB_VERSION and our struct size against its own.
    Decoder d;
    init_errors(d);
    const Step create = [](Decoder& dd, void*) {
        dd.created = true;
        g_lib.create(&dd.cinfo, JPEG_LIB_VERSION, sizeof(jpeg_decompress_struct));
    };
    if (!guarded(d, create, nullptr)) {
        d.created = false;  // nothing to destroy past a refused version check
        return std::string("the libjpeg at ") + path + " does not take this build's ABI (version " +
               std::to_string(JPEG_LIB_VERSION) + ")";
    }
    g_bound.store(true);
    return "";
}

JpegStatus jpeg_decode_rgb(const uint8_t* data, size_t size, uint8_t* out, ptrdiff_t stride, int width, int height,
                           JpegBands bands, RowGate* gate) {
    if (!g_bound.load() || width <= 0 || height <= 0 || stride < ptrdiff_t(width) * 3) return JpegStatus::Declined;
    const WorkScope busy;
    Source src{data, size, width, height};
    Decoder top;
    JpegStatus st = open(top, src);
    if (st != JpegStatus::Whole) return st;
    const JDIMENSION h = top.cinfo.output_height;
    const JDIMENSION imcu = imcu_rows(top.cinfo);
    // The lower band entropy-decodes the upper band's rows again while skipping them, so the
    // upper band is the larger: 13/20 of the rows balanced the two on 1080p photos (4:2:0 and
    // 4:4:4, q90: 0.68-0.72x the whole decode's time on two threads). Whole, on the calling
    // thread: multi-scan (progressive) images; under kIdle, small images (a second decoder and
    // a thread hand-off cost more than half the decode) and a process doing other native work
    // (whose threads the bands would only take from it, at a cost).
    const bool banded =
        !gate && !src.multi_scan && h >= 2 * imcu &&
        (bands == JpegBands::kAlways || (bands == JpegBands::kIdle && num_threads() > 1 && work_in_flight() == 1 &&
                                         h >= 256 && int64_t(width) * h >= kMinBandedPixels));
    if (!banded) return decode_band(top, out, stride, 0, h, gate);
    const JDIMENSION cut = std::max<JDIMENSION>(1, (h * 13 / 20) / imcu) * imcu;
    const auto lower = [&]() {
        Decoder low;
        Source again{data, size, width, height};
        JpegStatus st2 = open(low, again);
        return st2 == JpegStatus::Whole ? decode_band(low, out + ptrdiff_t(cut) * stride, stride, cut, h) : st2;
    };
    JpegStatus status[2] = {JpegStatus::Failed, JpegStatus::Failed};
    bool one_pass = false;
    parallel_for(2, 1, [&](int64_t b, int64_t e) {
        if (b == 0 && e == 2 && bands != JpegBands::kAlways) {  // a busy pool: bands gain nothing
            one_pass = true;
            status[0] = status[1] = decode_band(top, out, stride, 0, h);
            return;
        }
        if (b == 0) status[0] = decode_band(top, out, stride, 0, cut);
        if (e == 2) status[1] = lower();
    });
    if (status[0] == JpegStatus::Whole && status[1] == JpegStatus::Whole)
        return one_pass ? JpegStatus::Whole : JpegStatus::Banded;
    return status[0] == JpegStatus::Declined || status[1] == JpegStatus::Declined ? JpegStatus::Declined
                                                                                  : JpegStatus::Failed;
}

#endif

}  // namespace smg
