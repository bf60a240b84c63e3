// Thread-local pools of large buffers. take() reuses a pooled block when one fits, so repeated
// calls of the same size allocate (and page-fault) nothing; give() returns a block to the pool of
// the calling thread, freeing it instead when that pool is at its byte cap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace smg {

struct Block {
    void* data = nullptr;
    size_t capacity = 0;
};

struct ScratchStats {
    uint64_t hits;         // take() served from a pool
    uint64_t misses;       // take() had to allocate
    uint64_t gives;        // blocks returned to a pool
    uint64_t drops;        // blocks freed because a pool was full
    int64_t pooled_bytes;  // bytes parked in pools right now (all threads)
    int64_t live_bytes;    // bytes handed out and not yet given back
};

// A block of at least n bytes, 64-byte aligned (2 MiB aligned and THP-advised when large).
// zero: fill the first n bytes with zeros. Throws std::bad_alloc on failure.
Block scratch_take(size_t n, bool zero);
void scratch_give(Block b);
ScratchStats scratch_stats();
void scratch_reset_stats();
// Per-thread cap on pooled bytes (default 512 MiB, env SMG_FAST_SCRATCH_MB).
void scratch_set_cap(int64_t bytes);
int64_t scratch_cap();
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
    T* as() const { return static_cast<T*>(b_.data); }

private:
    Block b_;
};

}  // namespace smg
