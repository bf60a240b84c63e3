#include "jpeg_pipeline.hpp"

#include <chrono>

namespace smg {

JpegStatus jpeg_decode_run(const Pipeline& pl, const uint8_t* data, size_t size, uint8_t* img, ptrdiff_t stride,
                           int width, int height, int resize_w, int resize_h, int grid_h, int grid_w, void* dst,
                           double* decode_seconds) {
    auto status = JpegStatus::Failed;
    const ImageView src{img, width, height, 3, stride};
    pl.run_producing(src, PixelFormat::RGB, resize_w, resize_h, grid_h, grid_w, dst, [&](RowGate& gate) {
        const auto t0 = std::chrono::steady_clock::now();
        status = jpeg_decode_rgb(data, size, img, stride, width, height, JpegBands::kNever, &gate);
        if (decode_seconds) *decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return status == JpegStatus::Whole;
    });
    return status;
}

}  // namespace smg
