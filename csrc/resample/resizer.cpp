#include "resample/resizer.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "parallel.hpp"
#include "resample/nearest.hpp"
#include "resample/passes.hpp"
#include "resample/shape_cache.hpp"
#include "resample/torch_weights.hpp"
#include "resample/tuning.hpp"
#include "scratch.hpp"

namespace smg {

bool is_valid_pass_order(PassOrder order) {
    return order == PassOrder::HorizontalFirst || order == PassOrder::Pillow13;
}

bool is_valid_resampler(Resampler r) { return r == Resampler::Pillow || r == Resampler::Torch; }

bool vertical_first(int in_w, int in_h, int out_w, int out_h, PassOrder order) {
    if (order != PassOrder::Pillow13) return false;
    const int64_t dh = int64_t(in_h) - out_h, dw = int64_t(in_w) - out_w;
    return dh > 0 && dh > 2 * dw;
}

namespace {

// Converted source rows live in pooled scratch that grows to the largest band a call needs.
class Band {
public:
    Band() = default;
    ~Band() { scratch_give(block_); }
    Band(const Band&) = delete;
    Band& operator=(const Band&) = delete;
    uint8_t* get(size_t n) {
        if (block_.capacity < n) {
            scratch_give(block_);
            block_ = Block{};
            block_ = scratch_take(n, false);
        }
        return static_cast<uint8_t*>(block_.data);
    }

private:
    Block block_{};
};

// Source rows a converted band holds when the pass leaves the choice (a vertical window may need
// more: then one window's rows).
constexpr int kBandRows = 64;

}  // namespace

struct Resizer::Impl {
    enum Mode { Copy, Nearest, VerticalOnly, HorizontalOnly, HorizontalFirst, VerticalFirst };
    ImageView src;
    int out_w, out_h;
    int out_c;  // output channels: src.channels, or 3 when an RGBX source's pad byte is dropped
    Mode mode;
    PixelFormat fmt = PixelFormat::RGB;
    bool conv = false;  // src is converted to RGB (3 channels) band by band before the kernels
    AxisWeights kh, kv;
    HPlan plan;                                         // of kh, when the horizontal pass runs
    const KernelRow<VerticalRowFn>* vkernel = nullptr;  // for kv, when the vertical pass runs
    std::vector<int> xin, yin;
    // rows_end[y]: source rows [0, rows_end[y]) hold all that output rows [0, y] read (empty:
    // row for row). Indexed once, as run_producing asks per block row.
    std::vector<int> rows_end;
    void index_rows_end() {
        rows_end.resize(size_t(out_h));
        int end = 0;
        for (int y = 0; y < out_h; ++y) {  // Nearest's -1 is a filled row, reading nothing
            end = std::max(end, mode == Nearest ? yin[y] + 1 : kv.pil_min[y] + kv.pil_len[y]);
            rows_end[y] = std::min(end, src.height);
        }
    }

    const HPlan& hplan() const { return plan; }
    // Fills every member but src's pixels from the shape (the constructor's arguments).
    void shape(const ImageView& source, int width, int height, Filter f, PassOrder order, Resampler rs, bool rgb_out,
               PixelFormat format);
    // The bytes this shape holds: weights, tables and the horizontal plan.
    size_t footprint() const {
        size_t n = sizeof(Impl) + (plan.plan ? plan.plan->bytes() : 0);
        for (const AxisWeights* k : {&kh, &kv})
            n += k->weights.capacity() * sizeof(int32_t) +
                 (k->start.capacity() + k->pil_min.capacity() + k->pil_len.capacity()) * sizeof(int);
        return n + (xin.capacity() + yin.capacity() + rows_end.capacity()) * sizeof(int);
    }
    // Bytes between converted rows: slack past each row lets the horizontal kernels read one
    // byte beyond it without taking their padded-copy path.
    int64_t conv_stride() const { return int64_t(src.width) * 3 + 16; }
    // Source rows [r0, r1) as RGB in band; the view's row 0 is source row r0.
    ImageView converted(int r0, int r1, Band& band) const {
        const int64_t cs = conv_stride();
        uint8_t* p = band.get(size_t(cs) * (r1 - r0) + 64);
        convert_rows(fmt, src, r0, r1, p, cs);
        return ImageView{p, src.width, r1 - r0, 3, cs};
    }
    // Source rows [r0, r1) through the horizontal pass into dst rows [0, r1 - r0).
    void hpass(int r0, int r1, uint8_t* dst, int64_t dst_stride, Band& band) const {
        if (!conv) {
            horizontal_rows(src, r0, 0, r1 - r0, dst, dst_stride, out_w, out_c, kh, hplan());
            return;
        }
        for (int a = r0; a < r1; a += kBandRows) {
            const int b = std::min(r1, a + kBandRows);
            horizontal_rows(converted(a, b, band), 0, 0, b - a, dst + (a - r0) * dst_stride, dst_stride, out_w, out_c,
                            kh, hplan());
        }
    }
    void rows_converted(int y0, int y1, uint8_t* out, int64_t out_stride) const;
};

namespace {

// Never destroyed (threads may resize during exit). fork() takes its lock, a leaf lock (nothing
// else is taken under it), so a child never inherits it held by a thread the child lacks.
ShapeCache<Resizer::Impl>& shapes() {
    static ShapeCache<Resizer::Impl>* cache = [] {
        auto* c = new ShapeCache<Resizer::Impl>();
        pthread_atfork([] { shapes().lock(); }, [] { shapes().unlock(); }, [] { shapes().unlock(); });
        return c;
    }();
    return *cache;
}

}  // namespace

Resizer::Resizer(const ImageView& src, int out_w, int out_h, Filter f, PassOrder order, Resampler rs, bool rgb_out)
    : Resizer(src, out_w, out_h, f, order, rs, rgb_out, src.channels == 3 ? PixelFormat::RGB : PixelFormat::RGBX) {
    // Any channel count 1..4 is filtered as it is: no conversion.
}

Resizer::Resizer(const ImageView& src, int out_w, int out_h, Filter f, PassOrder order, Resampler rs, bool rgb_out,
                 PixelFormat fmt)
    : impl_(new Impl) {
    if (!is_valid_resampler(rs)) throw std::invalid_argument("unknown resampler " + std::to_string(int(rs)));
    if (rs == Resampler::Torch && !torch_implements(f))
        throw std::invalid_argument("the torch resampler implements BICUBIC, BILINEAR and LANCZOS only");
    if (src.channels < 1 || src.channels > 4) throw std::invalid_argument("resize: channels must be 1..4");
    if (src.width < 1 || src.height < 1 || out_w < 1 || out_h < 1) throw std::invalid_argument("resize: empty image");
    if (!is_valid_format(fmt)) throw std::invalid_argument("resize: unknown pixel format " + std::to_string(int(fmt)));
    // The delegating constructor passes RGB / RGBX for any channel count: those read in place.
    if (!is_direct_format(fmt) && src.channels != format_channels(fmt))
        throw std::invalid_argument("resize: channel count does not match the pixel format");
    // Everything below depends on the shape only: made once per shape while it stays in use.
    const ShapeCache<Impl>::Key key{src.width, src.height, src.channels, out_w,        out_h,
                                    int(f),    int(order), int(rs),      int(rgb_out), int(fmt)};
    if (const std::shared_ptr<const Impl> known = shapes().find(key)) {
        *impl_ = *known;
        impl_->src = src;
        return;
    }
    impl_->shape(src, out_w, out_h, f, order, rs, rgb_out, fmt);
    const size_t bytes = impl_->footprint();
    if (!ShapeCache<Impl>::keeps(bytes)) return;  // never copied for nothing
    try {  // keeping it is an optimization: without memory for it, the resize goes on
        const std::shared_ptr<Impl> kept = std::make_shared<Impl>(*impl_);
        kept->src = ImageView{};  // the shape only
        shapes().put(key, kept, bytes);
    } catch (const std::bad_alloc&) {
    }
}

void install_shape_cache_fork_handlers() { shapes(); }

ShapeCacheStats shape_cache_stats() { return shapes().stats(); }

void shape_cache_clear() { shapes().clear(); }

void Resizer::Impl::shape(const ImageView& source, int width, int height, Filter f, PassOrder order, Resampler rs,
                          bool rgb_out, PixelFormat format) {
    Impl& m = *this;
    const ImageView& src = source;
    const int out_w = width, out_h = height;
    m.src = src;
    m.out_w = out_w;
    m.out_h = out_h;
    m.fmt = format;
    m.conv = !is_direct_format(format);
    const int C = m.conv ? 3 : src.channels;  // channels the kernels see
    m.out_c = C;
    const bool need_h = src.width != out_w, need_v = src.height != out_h;
    if (!need_h && !need_v) {
        m.mode = Impl::Copy;  // Pillow returns a copy for the same size
        return;
    }
    if (f == Filter::Nearest) {
        m.mode = Impl::Nearest;
        m.xin = nearest_table(src.width, out_w);
        m.yin = nearest_table(src.height, out_h);
        m.index_rows_end();
        return;
    }
    const bool torch = rs == Resampler::Torch;
    if (need_h) {
        m.kh = torch ? make_torch_weights(src.width, out_w, f) : make_weights(src.width, out_w, f);
    }
    if (need_v) m.kv = torch ? make_torch_weights(src.height, out_h, f) : make_weights(src.height, out_h, f);
    if (!need_v) {
        m.mode = Impl::HorizontalOnly;
    } else if (!need_h) {
        m.mode = Impl::VerticalOnly;
    } else if (!torch && vertical_first(src.width, src.height, out_w, out_h, order)) {  // torch: always H first
        m.mode = Impl::VerticalFirst;
    } else {
        m.mode = Impl::HorizontalFirst;
    }
    // Modes that end with (or start with) a horizontal pass can drop RGBX's pad byte for free.
    if (rgb_out && C == 4 &&
        (m.mode == Impl::HorizontalOnly || m.mode == Impl::HorizontalFirst || m.mode == Impl::VerticalFirst))
        m.out_c = 3;
    if (need_h) m.plan = choose_hplan(m.kh, src.width, out_w, C, m.out_c);
    if (need_v) {
        m.vkernel = &choose_vertical(m.kv);
        m.index_rows_end();  // the vertical kernel's trimmed windows, both orders
    }
}

int Resizer::out_channels() const { return impl_->out_c; }

int Resizer::source_rows_end(int y1) const {
    const Impl& m = *impl_;
    y1 = std::clamp(y1, 0, m.out_h);
    return m.rows_end.empty() || y1 == 0 ? y1 : m.rows_end[size_t(y1 - 1)];
}

Resizer::~Resizer() = default;

// The passes of rows() for a converted source: each reads only RGB bands converted from the
// source rows it needs.
void Resizer::Impl::rows_converted(int y0, int y1, uint8_t* out, int64_t out_stride) const {
    Band band, inter;
    switch (mode) {
        case Copy: convert_rows(fmt, src, y0, y1, out, out_stride); break;
        case Nearest: {
            // One converted source row, seen through a zero stride as every row of the image.
            int held = -1;
            uint8_t* row = band.get(size_t(conv_stride()) + 64);
            for (int y = y0; y < y1; ++y) {
                if (yin[y] >= 0 && yin[y] != held) {
                    convert_rows(fmt, src, yin[y], yin[y] + 1, row, conv_stride());
                    held = yin[y];
                }
                nearest_rows(ImageView{row, src.width, src.height, 3, 0}, xin, yin, y, y + 1,
                             out + int64_t(y - y0) * out_stride, out_stride);
            }
            break;
        }
        case HorizontalOnly: hpass(y0, y1, out, out_stride, band); break;
        case VerticalOnly:
        case VerticalFirst:
            // Runs of output rows whose vertical windows together span at most kBandRows source
            // rows (or one window), each from its own converted band.
            for (int a = y0; a < y1;) {
                int first = kv.pil_min[a], last = first + kv.pil_len[a], b = a + 1;
                for (; b < y1; ++b) {
                    const int f = std::min(first, kv.pil_min[b]);
                    const int l = std::max(last, kv.pil_min[b] + kv.pil_len[b]);
                    if (l - f > kBandRows) break;
                    first = f;
                    last = l;
                }
                const ImageView v = converted(first, last, band);
                uint8_t* dst = out + int64_t(a - y0) * out_stride;
                if (mode == VerticalOnly) {
                    vertical_rows(v, first, a, b, dst, out_stride, out_w, kv, *vkernel);
                } else {
                    const int64_t ts = conv_stride();
                    uint8_t* tmp = inter.get(size_t(ts) * (b - a) + 64);
                    vertical_rows(v, first, a, b, tmp, ts, src.width, kv, *vkernel);
                    horizontal_rows(ImageView{tmp, src.width, b - a, 3, ts}, 0, 0, b - a, dst, out_stride, out_w, out_c,
                                    kh, hplan());
                }
                a = b;
            }
            break;
        case HorizontalFirst: break;  // rows() runs it, converting through hpass()
    }
}

void Resizer::rows(int y0, int y1, uint8_t* out, int64_t out_stride, RowCarry* carry) const {
    const Impl& m = *impl_;
    if (m.conv && m.mode != Impl::HorizontalFirst) {
        m.rows_converted(y0, y1, out, out_stride);
        return;
    }
    switch (m.mode) {
        case Impl::Copy:
            for (int y = y0; y < y1; ++y)
                std::memcpy(out + (y - y0) * out_stride, m.src.data + int64_t(y) * m.src.stride,
                            size_t(m.out_w) * m.src.channels);
            break;
        case Impl::Nearest: nearest_rows(m.src, m.xin, m.yin, y0, y1, out, out_stride); break;
        case Impl::VerticalOnly: vertical_rows(m.src, 0, y0, y1, out, out_stride, m.out_w, m.kv, *m.vkernel); break;
        case Impl::HorizontalOnly:
            horizontal_rows(m.src, 0, y0, y1, out, out_stride, m.out_w, m.out_c, m.kh, m.hplan());
            break;
        case Impl::HorizontalFirst: {
            // Only the source rows these output rows read, through the horizontal pass into a
            // small pooled buffer that stays in cache for the vertical pass. Neighbouring bands
            // share a few rows: with a carry they are moved from the previous call's buffer,
            // otherwise recomputed (still cheaper than a full intermediate image's round trip
            // through memory).
            int first = m.kv.pil_min[y0], last = first + m.kv.pil_len[y0];
            for (int y = y0 + 1; y < y1; ++y) {
                first = std::min(first, m.kv.pil_min[y]);
                last = std::max(last, m.kv.pil_min[y] + m.kv.pil_len[y]);
            }
            const int64_t stride = int64_t(m.out_w) * m.out_c;
            const size_t need = size_t(stride) * (last - first) + 64;
            RowCarry local;  // without a caller's carry: a pooled buffer for this call only
            RowCarry& c = carry ? *carry : local;
            if (c.owner_ != impl_.get() || c.block_.capacity < need || c.stride_ != stride) {
                if (c.block_.capacity < need) {
                    scratch_give(c.block_);
                    c.block_ = scratch_take(need, false);
                }
                c.owner_ = impl_.get();
                c.count_ = 0;
                c.stride_ = stride;
            }
            uint8_t* tmp = static_cast<uint8_t*>(c.block_.data);
            // Rows [kept0, kept1) are already there from the previous call: move them into place.
            int kept0 = std::max(first, c.first_), kept1 = std::min(last, c.first_ + c.count_);
            if (kept0 < kept1) {
                std::memmove(tmp + (kept0 - first) * stride, tmp + (kept0 - c.first_) * stride,
                             size_t(kept1 - kept0) * stride);
            } else {
                kept0 = kept1 = first;
            }
            c.first_ = first;
            c.count_ = last - first;
            Band band;  // converted source rows (a converted source only)
            m.hpass(first, kept0, tmp, stride, band);
            m.hpass(kept1, last, tmp + (kept1 - first) * stride, stride, band);
            const ImageView t{tmp, m.out_w, last - first, m.out_c, stride};
            vertical_rows(t, first, y0, y1, out, out_stride, m.out_w, m.kv, *m.vkernel);
            break;
        }
        case Impl::VerticalFirst: {
            const int C = m.src.channels;
            const int64_t stride = int64_t(m.src.width) * C;
            ScratchBuffer tmp(size_t(stride) * (y1 - y0) + 64);
            vertical_rows(m.src, 0, y0, y1, tmp.as<uint8_t>(), stride, m.src.width, m.kv, *m.vkernel);
            const ImageView t{tmp.as<uint8_t>(), m.src.width, y1 - y0, C, stride};
            horizontal_rows(t, 0, 0, y1 - y0, out, out_stride, m.out_w, m.out_c, m.kh, m.hplan());
            break;
        }
    }
}

void resize(const ImageView& src, const MutImageView& dst, Filter f, PassOrder order, Resampler rs) {
    if (src.channels != dst.channels) throw std::invalid_argument("resize: channel counts must match");
    Resizer r(src, dst.width, dst.height, f, order, rs);
    parallel_for(dst.height, 32,
                 [&](int64_t b, int64_t e) { r.rows(int(b), int(e), dst.data + b * dst.stride, dst.stride); });
}

}  // namespace smg
