// JPEG to RGB through the libjpeg that Pillow itself loaded (found by the caller, bound with
// dlopen(RTLD_NOLOAD): never a second copy), with Pillow's settings: accurate integer IDCT,
// fancy upsampling. The same library and settings as Pillow's decoder, so the same pixels; the
// Python side still checks against Pillow once per process before first use.
//
// A sequential (single-scan) image can be decoded in two row bands on two threads: the lower
// band skips the upper band's rows with jpeg_skip_scanlines (entropy decoding only, the IDCT and
// colour conversion are skipped), restarts one iMCU row early and drops that row: a defence
// for the upsampler's context rows (libjpeg-turbo 3.2 gives the same pixels without it, tested;
// it costs one iMCU row). Built only where jpeglib.h was found at build time; without
// it jpeg_bind reports why and the Python side keeps its other decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "row_gate.hpp"

namespace smg {

// Binds to the libjpeg (6.2 ABI) at `path`, which must already be loaded in this process.
// Returns "" on success, else why not (no headers at build time, not loaded, a symbol missing,
// the library refusing our struct size). Thread-safe; the first success wins.
std::string jpeg_bind(const char* path);

enum class JpegStatus {
    Whole,     // decoded, in one pass
    Banded,    // decoded, in two row bands (whichever threads ran them)
    Declined,  // not a case this decoder takes (colour space, precision, arithmetic coding, size)
    Failed,    // a libjpeg error or warning (corrupt or truncated data): Pillow decides
};

// When a single-scan image is decoded in two row bands. Only for sequential DCT frames
// (SOF0/SOF1): libjpeg cannot skip rows of a lossless one (the decode fails).
enum class JpegBands {
    kNever,
    kIdle,    // 256+ rows and 512 x 512+ pixels, 2+ threads, no other native work in flight
    kAlways,  // any image of two iMCU rows or more, on the pool or one after the other (checks)
};

// Decodes `size` bytes into `out`: height rows of width * 3 bytes, `stride` bytes apart. The
// header must say width x height. Never throws for bad data. With a gate: decoded whole on this
// thread, each batch of rows published as it is written (the status still decides whether the
// rows count; the caller fails the gate otherwise).
JpegStatus jpeg_decode_rgb(const uint8_t* data, size_t size, uint8_t* out, ptrdiff_t stride, int width, int height,
                           JpegBands bands, RowGate* gate = nullptr);

}  // namespace smg
