#include "scratch.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace smg {

namespace {

constexpr size_t kHuge = size_t(2) << 20;  // 2 MiB: THP page size
constexpr size_t kSmallAlign = 64;
constexpr size_t kMaxBlocksPerThread = 32;

std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_gives{0}, g_drops{0}, g_remote{0};
std::atomic<int64_t> g_pooled{0}, g_live{0};

int64_t env_mb(const char* name, int64_t fallback_mb) {
    if (const char* env = std::getenv(name)) {
        const long mb = std::atol(env);
        if (mb >= 0) return int64_t(mb) << 20;
    }
    return fallback_mb << 20;
}

std::atomic<int64_t> g_cap{env_mb("SMG_FAST_SCRATCH_MB", 512)};
std::atomic<int64_t> g_total_cap{env_mb("SMG_FAST_SCRATCH_TOTAL_MB", 1024)};
std::atomic<uint64_t> g_next_id{1};

size_t round_capacity(size_t n) {
    if (n >= kHuge / 2) return (n + kHuge - 1) / kHuge * kHuge;
    return (std::max<size_t>(n, 1) + 4095) / 4096 * 4096;
}

void* allocate(size_t cap, bool huge) {
    const size_t align = cap >= kHuge ? kHuge : kSmallAlign;
    void* p = nullptr;
    if (posix_memalign(&p, align, cap) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (huge && cap >= kHuge) madvise(p, cap, MADV_HUGEPAGE);  // fewer faults on first touch
#else
    (void)huge;
#endif
    return p;
}

void drop(const Block& b) {
    g_drops.fetch_add(1);
    std::free(b.data);
}

// Blocks to free once the locks are released. Fixed capacity: a give runs in destructors and
// must not allocate (a pool holds at most kMaxBlocksPerThread blocks, plus the one given).
struct ToFree {
    Block items[kMaxBlocksPerThread + 1];
    size_t n = 0;
    void push_back(const Block& b) {
        if (n < kMaxBlocksPerThread + 1)
            items[n++] = b;
        else
            std::free(b.data);  // unreachable by the bound above; never leak
    }
    ~ToFree() {
        for (size_t i = 0; i < n; ++i) drop(items[i]);
    }
};

// One thread's pool. Its own thread takes and gives; other threads give back blocks it took
// (found through the registry below), so every access holds mu.
struct Pool {
    const uint64_t id = g_next_id.fetch_add(1);
    std::mutex mu;
    std::vector<Block> free;  // most recently given last
    int64_t bytes = 0;

    bool take(size_t n, Block* out) {
        std::lock_guard<std::mutex> lock(mu);
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

    // Parks b, or hands it back in *to_free (with any blocks evicted to make room): the caller
    // frees them after releasing its locks (munmap of a large block is slow).
    void give(Block b, ToFree* to_free) {
        std::lock_guard<std::mutex> lock(mu);
        const int64_t cap = g_cap.load();
        const int64_t total_cap = g_total_cap.load();
        const int64_t size = int64_t(b.capacity);
        if (size > cap || size > total_cap) {
            to_free->push_back(b);
            return;
        }
        // Evict this pool's oldest blocks until the new one fits under both caps.
        while (!free.empty() &&
               (bytes + size > cap || free.size() >= kMaxBlocksPerThread || g_pooled.load() + size > total_cap)) {
            Block old = free.front();
            free.erase(free.begin());
            bytes -= int64_t(old.capacity);
            g_pooled.fetch_sub(int64_t(old.capacity));
            to_free->push_back(old);
        }
        // Other pools may have filled the process-wide budget meanwhile: reserve, or free. A
        // compare-exchange, so the total never passes the cap, not even for a moment.
        int64_t pooled = g_pooled.load();
        do {
            if (pooled + size > total_cap) {
                to_free->push_back(b);
                return;
            }
        } while (!g_pooled.compare_exchange_weak(pooled, pooled + size));
        free.push_back(b);
        bytes += size;
        g_gives.fetch_add(1);
    }

    void release() {
        std::vector<Block> out;
        {
            std::lock_guard<std::mutex> lock(mu);
            out.swap(free);
            for (const Block& b : out) g_pooled.fetch_sub(int64_t(b.capacity));
            bytes = 0;
        }
        for (const Block& b : out) std::free(b.data);
    }
};

// Live pools by id. Lock order: g_registry_mu, then a pool's mu.
std::mutex g_registry_mu;
std::unordered_map<uint64_t, Pool*>& registry() {
    static auto* map = new std::unordered_map<uint64_t, Pool*>();  // never destroyed: threads
    return *map;                                                   // may exit after main
}

// The calling thread's pool, registered on first use and unregistered (then freed with its
// blocks) when the thread exits; blocks it handed out and that come back later are freed.
struct LocalPool {
    Pool* pool = nullptr;

    Pool& get() {
        if (pool == nullptr) {
            pool = new Pool();
            std::lock_guard<std::mutex> lock(g_registry_mu);
            registry()[pool->id] = pool;
        }
        return *pool;
    }

    ~LocalPool() {
        if (pool == nullptr) return;
        {
            std::lock_guard<std::mutex> lock(g_registry_mu);
            registry().erase(pool->id);
        }
        pool->release();  // nobody can reach it any more
        delete pool;
    }
};

LocalPool& local() {
    thread_local LocalPool holder;
    return holder;
}

}  // namespace

void install_scratch_fork_handlers() {
    // fork() takes the registry lock, so no thread is registering, unregistering or giving
    // a block to another thread's pool (the only ways a pool's lock is held by a thread other
    // than its owner). The child keeps the forking thread's pool and drops the others: their
    // threads do not exist there (a block they took is freed when given back), and their locks
    // may have been held by those threads.
    static const bool installed = [] {
        registry();
        pthread_atfork([] { g_registry_mu.lock(); }, [] { g_registry_mu.unlock(); },
                       [] {
                           Pool* own = local().pool;
                           auto& map = registry();
                           for (auto it = map.begin(); it != map.end();) {
                               if (it->second == own)
                                   ++it;
                               else
                                   it = map.erase(it);  // leaked: its lock may be held
                           }
                           g_pooled.store(own != nullptr ? own->bytes : 0);
                           g_registry_mu.unlock();
                       });
        return true;
    }();
    (void)installed;
}

Block scratch_take(size_t n, bool zero, bool huge) {
    Pool& pool = local().get();
    Block b;
    if (pool.take(n, &b)) {
        g_hits.fetch_add(1);
    } else {
        b.capacity = round_capacity(n);
        b.data = allocate(b.capacity, huge);
        b.owner = pool.id;
        g_misses.fetch_add(1);
    }
    g_live.fetch_add(int64_t(b.capacity));
    if (zero && n) std::memset(b.data, 0, n);
    return b;
}

void scratch_give(Block b) {
    if (!b.data) return;
    g_live.fetch_sub(int64_t(b.capacity));
    ToFree to_free;  // freed when this function returns, after every lock is released
    LocalPool& me = local();
    if (me.pool != nullptr && me.pool->id == b.owner) {
        me.pool->give(b, &to_free);
    } else {
        g_remote.fetch_add(1);
        // The registry lock keeps the owner's pool alive while we park b in it; nothing is
        // freed under it, so other threads' gives and thread exits do not wait on munmap.
        std::lock_guard<std::mutex> lock(g_registry_mu);
        auto it = registry().find(b.owner);
        if (it == registry().end())
            to_free.push_back(b);  // its thread has exited
        else
            it->second->give(b, &to_free);
    }
}

ScratchStats scratch_stats() {
    return ScratchStats{g_hits.load(),   g_misses.load(), g_gives.load(), g_drops.load(),
                        g_remote.load(), g_pooled.load(), g_live.load()};
}

void scratch_set_cap(int64_t bytes) { g_cap.store(std::max<int64_t>(0, bytes)); }

int64_t scratch_cap() { return g_cap.load(); }

void scratch_set_total_cap(int64_t bytes) { g_total_cap.store(std::max<int64_t>(0, bytes)); }

int64_t scratch_total_cap() { return g_total_cap.load(); }

int64_t scratch_thread_pooled() {
    LocalPool& me = local();
    if (me.pool == nullptr) return 0;
    std::lock_guard<std::mutex> lock(me.pool->mu);
    return me.pool->bytes;
}

void scratch_release() {
    LocalPool& me = local();
    if (me.pool != nullptr) me.pool->release();
}

}  // namespace smg
