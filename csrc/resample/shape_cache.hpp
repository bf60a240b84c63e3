// What a resize works out before reading a pixel (weights, kernels, plans) depends only on its
// shape: sizes, channels, format, filter, pass order and resampler. This keeps the most recently
// used shapes' results, so that the frames of a video, a server's recurring image sizes and a
// bench's repeated calls skip the work (about 0.1-0.4 ms a resize for 1080p-12 MP sources).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <utility>

namespace smg {

// Counters of the shape cache (Resizer's), for tests and stats.
struct ShapeCacheStats {
    int64_t hits = 0, misses = 0;
    int64_t entries = 0, bytes = 0;
};

// Up to kEntries values, and up to kBudget of their bytes (as the caller counts them), least
// recently used out first; a value over a quarter of the budget is never kept. Thread-safe (one
// leaf lock, which fork() handlers may hold across a fork: lock() / unlock()); the values are
// shared read-only.
template <class V>
class ShapeCache {
public:
    using Key = std::array<int, 10>;
    static constexpr size_t kEntries = 64;
    static constexpr size_t kBudget = size_t(32) << 20;

    // Whether a value of this many bytes may be kept at all.
    static bool keeps(size_t bytes) { return bytes <= kBudget / 4; }

    std::shared_ptr<const V> find(const Key& key) {
        const std::lock_guard<std::mutex> lock(mu_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->key != key) continue;
            entries_.splice(entries_.begin(), entries_, it);  // most recent first
            ++hits_;
            return entries_.front().value;
        }
        ++misses_;
        return nullptr;
    }

    void put(const Key& key, std::shared_ptr<const V> value, size_t bytes) {
        if (!keeps(bytes)) return;
        std::list<Entry> evicted;  // freed after the lock is released
        const std::lock_guard<std::mutex> lock(mu_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->key != key) continue;  // another thread made the same shape first
            entries_.splice(entries_.begin(), entries_, it);
            return;
        }
        entries_.push_front(Entry{key, std::move(value), bytes});
        bytes_ += bytes;
        while (entries_.size() > kEntries || bytes_ > kBudget) {
            bytes_ -= entries_.back().bytes;
            evicted.splice(evicted.begin(), entries_, std::prev(entries_.end()));
        }
    }

    void clear() {
        std::list<Entry> dropped;
        const std::lock_guard<std::mutex> lock(mu_);
        dropped.swap(entries_);
        bytes_ = 0;
    }

    ShapeCacheStats stats() {
        const std::lock_guard<std::mutex> lock(mu_);
        return {hits_, misses_, int64_t(entries_.size()), int64_t(bytes_)};
    }

    void lock() { mu_.lock(); }
    void unlock() { mu_.unlock(); }

private:
    struct Entry {
        Key key;
        std::shared_ptr<const V> value;
        size_t bytes;
    };
    std::mutex mu_;
    std::list<Entry> entries_;
    size_t bytes_ = 0;
    int64_t hits_ = 0, misses_ = 0;
};

}  // namespace smg
