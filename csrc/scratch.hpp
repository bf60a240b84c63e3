// Per-thread pools of large buffers. take() reuses a pooled block when one fits, so repeated
// calls of the same size allocate (and page-fault) nothing; give() returns a block to the pool of
// the thread that took it (its owner; from another thread too, so a producer thread whose
// buffers a consumer thread drops keeps reusing them), freeing it instead when the owner has
// exited or parking it would pass the owner's cap or the process-wide cap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace smg {

struct Block {
    void* data = nullptr;
    size_t capacity = 0;
    uint64_t owner = 0;  // id of the pool (thread) that took it
};

struct ScratchStats {
    uint64_t hits;          // take() served from a pool
    uint64_t misses;        // take() had to allocate
    uint64_t gives;         // blocks returned to a pool
    uint64_t drops;         // blocks freed because a pool was full
    uint64_t remote_gives;  // blocks given back by another thread than their owner
    int64_t pooled_bytes;   // bytes parked in pools right now (all threads)
    int64_t live_bytes;     // bytes handed out and not yet given back
};

// A block of at least n bytes, 64-byte aligned (2 MiB aligned when large). zero: fill the first
// n bytes with zeros. huge: a newly allocated large block is advised for transparent huge pages,
// which is right for blocks the pools will reuse (scratch) and wrong for blocks a caller is likely
// to keep (outputs an engine caches): under THP defrag=madvise the first touch may then compact
// memory synchronously, several times slower than 4 KiB faults. Throws std::bad_alloc on failure.
Block scratch_take(size_t n, bool zero, bool huge = true);
void scratch_give(Block b);
ScratchStats scratch_stats();
// Per-thread cap on pooled bytes (default 512 MiB, env SMG_FAST_SCRATCH_MB).
void scratch_set_cap(int64_t bytes);
int64_t scratch_cap();
// Process-wide cap on pooled bytes, all threads together (default 1024 MiB, env
// SMG_FAST_SCRATCH_TOTAL_MB).
void scratch_set_total_cap(int64_t bytes);
int64_t scratch_total_cap();
// Bytes parked in the calling thread's pool.
int64_t scratch_thread_pooled();
// Frees every block pooled by the calling thread.
void scratch_release();

// RAII holder for native code paths.
class ScratchBuffer {
public:
    explicit ScratchBuffer(size_t n, bool zero = false) : b_(scratch_take(n, zero)) {}
    ~ScratchBuffer() { scratch_give(b_); }
    ScratchBuffer(const ScratchBuffer&) = delete;
    ScratchBuffer& operator=(const ScratchBuffer&) = delete;
    template <class T>
    T* as() const {
        return static_cast<T*>(b_.data);
    }

private:
    Block b_;
};

// Registers fork() handlers once (at module import): a forked child never waits on the pool
// registry's lock held by a thread of the parent it lacks, nor on those threads' pools.
void install_scratch_fork_handlers();

}  // namespace smg
