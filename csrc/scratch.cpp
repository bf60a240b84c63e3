#include "scratch.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace smg {

namespace {

constexpr size_t kHuge = size_t(2) << 20;   // 2 MiB: THP page size
constexpr size_t kSmallAlign = 64;
constexpr size_t kMaxBlocksPerThread = 32;

std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_gives{0}, g_drops{0};
std::atomic<int64_t> g_pooled{0}, g_live{0};

int64_t initial_cap() {
    if (const char* env = std::getenv("SMG_FAST_SCRATCH_MB")) {
        const long mb = std::atol(env);
        if (mb >= 0) return int64_t(mb) << 20;
    }
    return int64_t(512) << 20;
}

std::atomic<int64_t> g_cap{initial_cap()};

size_t round_capacity(size_t n) {
    if (n >= kHuge / 2) return (n + kHuge - 1) / kHuge * kHuge;
    return (std::max<size_t>(n, 1) + 4095) / 4096 * 4096;
}

void* allocate(size_t cap) {
    const size_t align = cap >= kHuge ? kHuge : kSmallAlign;
    void* p = nullptr;
    if (posix_memalign(&p, align, cap) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (cap >= kHuge) madvise(p, cap, MADV_HUGEPAGE);  // fewer page faults on first touch
#endif
    return p;
}

struct ThreadPool {
    std::vector<Block> free;  // most recently given last
    int64_t bytes = 0;

    ~ThreadPool() {
        for (Block& b : free) {
            g_pooled.fetch_sub(int64_t(b.capacity));
            std::free(b.data);
        }
    }

    bool take(size_t n, Block* out) {
        // Smallest block that fits and does not waste more than half of itself.
        int best = -1;
        for (int i = 0; i < int(free.size()); ++i) {
            const size_t c = free[i].capacity;
            if (c >= n && c <= 2 * n + kHuge && (best < 0 || c < free[best].capacity)) best = i;
        }
        if (best < 0) return false;
        *out = free[best];
        free.erase(free.begin() + best);
        bytes -= int64_t(out->capacity);
        g_pooled.fetch_sub(int64_t(out->capacity));
        return true;
    }

    void give(Block b) {
        const int64_t cap = g_cap.load();
        if (int64_t(b.capacity) > cap) {
            drop(b);
            return;
        }
        // Evict the oldest blocks until this one fits under the cap.
        while (!free.empty() && (bytes + int64_t(b.capacity) > cap || free.size() >= kMaxBlocksPerThread)) {
            Block old = free.front();
            free.erase(free.begin());
            bytes -= int64_t(old.capacity);
            g_pooled.fetch_sub(int64_t(old.capacity));
            drop(old);
        }
        free.push_back(b);
        bytes += int64_t(b.capacity);
        g_pooled.fetch_add(int64_t(b.capacity));
        g_gives.fetch_add(1);
    }

    void release() {
        for (Block& b : free) {
            g_pooled.fetch_sub(int64_t(b.capacity));
            std::free(b.data);
        }
        free.clear();
        bytes = 0;
    }

    static void drop(Block b) {
        g_drops.fetch_add(1);
        std::free(b.data);
    }
};

ThreadPool& local_pool() {
    thread_local ThreadPool pool;
    return pool;
}

}  // namespace

Block scratch_take(size_t n, bool zero) {
    Block b;
    if (local_pool().take(n, &b)) {
        g_hits.fetch_add(1);
    } else {
        b.capacity = round_capacity(n);
        b.data = allocate(b.capacity);
        g_misses.fetch_add(1);
    }
    g_live.fetch_add(int64_t(b.capacity));
    if (zero && n) std::memset(b.data, 0, n);
    return b;
}

void scratch_give(Block b) {
    if (!b.data) return;
    g_live.fetch_sub(int64_t(b.capacity));
    local_pool().give(b);
}

ScratchStats scratch_stats() {
    return ScratchStats{g_hits.load(), g_misses.load(), g_gives.load(),
                        g_drops.load(), g_pooled.load(), g_live.load()};
}

void scratch_reset_stats() {
    g_hits = 0;
    g_misses = 0;
    g_gives = 0;
    g_drops = 0;
}

void scratch_set_cap(int64_t bytes) { g_cap.store(std::max<int64_t>(0, bytes)); }

int64_t scratch_cap() { return g_cap.load(); }

void scratch_release() { local_pool().release(); }

}  // namespace smg
