#include "decode/jpeg_pipeline.hpp"

#include <ctime>

namespace smg {

namespace {

// The decode runs whole on one thread and never waits: its thread's CPU time is its work, which
// wall time is not where it shares the cores with the resize it feeds.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

JpegStatus jpeg_decode_run(const Pipeline& pl, const uint8_t* data, size_t size, uint8_t* img, ptrdiff_t stride,
                           int width, int height, int resize_w, int resize_h, int grid_h, int grid_w, void* dst,
                           double* decode_seconds) {
    auto status = JpegStatus::Failed;
    const ImageView src{img, width, height, 3, stride};
    pl.run_producing(src, PixelFormat::RGB, resize_w, resize_h, grid_h, grid_w, dst, [&](RowGate& gate) {
        const double t0 = thread_cpu_seconds();
        status = jpeg_decode_rgb(data, size, img, stride, width, height, JpegBands::kNever, &gate);
        if (decode_seconds) *decode_seconds = thread_cpu_seconds() - t0;
        return status == JpegStatus::Whole;
    });
    return status;
}

}  // namespace smg
