// The RDMA slot arena: one contiguous, pre-faulted buffer of `slots` equal slots that a NIXL agent
// registers once. A producer leases a slot for a key, writes its payload in place, and commits; a
// remote reader READs the slot's frame and then asks (by key) for the slot to be freed. Leases whose
// free never arrives are reaped after a TTL. The key is the lease's secret (the exporter makes it
// 128-bit random and hands it only to the client): a free names it, so nobody can free a slot
// whose handle they were not given. A slot being written belongs to its writer: free() refuses it
// (only the writer's abort() or commit() ends that state), so no second lease can share it.
//
// Frame of a committed slot (little-endian), read in one piece by the remote side:
//   [0, 64)              header: magic, version, generation, payload bytes, key hash
//   [64, 64 + n)         payload
//   [64 + align8(n), +8) trailer: the generation again
// A reader compares both generations with the one in its descriptor, so a slot that was reaped and
// leased again while the descriptor was in flight is detected instead of returned as data.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace smg {

constexpr uint64_t kFrameMagic = 0x314D415246474D53ULL;  // "SMGFRAM1" in memory order
constexpr uint32_t kFrameVersion = 1;
constexpr size_t kFrameHeader = 64;
constexpr size_t kFrameTrailer = 8;

// Bytes a frame with an n-byte payload occupies.
inline size_t frame_bytes(size_t n) { return kFrameHeader + ((n + 7) & ~size_t(7)) + kFrameTrailer; }
// FNV-1a of the key, stored in the header so a reader can tell whose frame it got.
uint64_t key_hash(const std::string& key);

struct SlotLease {
    int64_t slot = -1;        // -1: the arena was full
    uint64_t generation = 0;  // random per lease (getrandom), never 0, differs from the slot's last
    size_t frame_offset = 0;  // from the arena's base
    size_t frame_len = 0;     // frame_bytes(payload)
    size_t payload_offset = 0;
    size_t payload_len = 0;
};

struct ArenaCounters {
    uint64_t leased;        // leases handed out
    uint64_t committed;     // leases whose payload was written
    uint64_t freed;         // released by key (the reader's notification, or the producer)
    uint64_t reaped;        // released by the TTL sweep
    uint64_t full;          // lease refused: no free slot
    uint64_t too_large;     // lease refused: payload bigger than a slot
    uint64_t unknown_free;  // free for a key that holds no lease (late, duplicate or forged)
    uint64_t refused_free;  // free of a lease still being written (refused: only its writer ends it)
    uint64_t in_use;        // slots leased right now
};

class SlotArena {
public:
    // slot_bytes is the size of one slot including its frame; ttl_s > 0. Throws std::bad_alloc.
    SlotArena(size_t slots, size_t slot_bytes, double ttl_s);
    ~SlotArena();
    SlotArena(const SlotArena&) = delete;
    SlotArena& operator=(const SlotArena&) = delete;

    uint8_t* data() const { return base_; }
    size_t size() const { return slots_ * slot_bytes_; }
    size_t slots() const { return slots_; }
    size_t slot_bytes() const { return slot_bytes_; }
    size_t max_payload() const { return slot_bytes_ - kFrameHeader - kFrameTrailer; }
    double ttl_s() const { return ttl_s_; }

    // Leases a free slot for key and writes its header (the trailer comes with commit). Returns a
    // lease with slot -1 when every slot is taken. Throws std::length_error when the payload cannot
    // fit a slot, std::invalid_argument when key already holds a lease, and std::runtime_error
    // when the kernel gives no random bytes (the arena is then unchanged).
    SlotLease lease(const std::string& key, size_t payload_len);
    // Marks the payload written (writes the trailer) and starts the TTL clock. False if key holds
    // no lease any more (reaped while it was written).
    bool commit(const std::string& key);
    // Releases key's committed slot (a reader's notification, or the producer after delivery).
    // False (and counted) when key holds no lease, or holds one not committed yet: releasing a
    // slot still being written would let the next lease share it with the writer.
    bool free(const std::string& key);
    // The writer gives up its lease (committed or not): it has stopped writing. False if key
    // holds no lease.
    bool abort(const std::string& key);
    // Releases committed leases older than the TTL (uncommitted ones belong to a producer still
    // writing; it frees them itself on failure); returns how many.
    size_t reap();
    // Reaps as if `seconds` had passed (tests of the TTL path without sleeping).
    size_t reap_after(double seconds);

    // Leases, copies src in with the thread pool, commits. Slot -1 when full.
    SlotLease copy_in(const std::string& key, const void* src, size_t n);

    ArenaCounters counters() const;

private:
    using Clock = std::chrono::steady_clock;
    struct Slot {
        bool busy = false;
        bool committed = false;
        uint64_t generation = 0;
        Clock::time_point since;
        std::string key;
    };
    size_t reap_locked(Clock::time_point now);
    uint64_t fresh_generation(uint64_t previous);
    void release_locked(size_t slot);

    uint8_t* base_ = nullptr;
    size_t slots_;
    size_t slot_bytes_;
    double ttl_s_;
    mutable std::mutex mu_;
    std::vector<Slot> table_;
    std::unordered_map<std::string, size_t> by_key_;
    std::vector<size_t> free_list_;
    ArenaCounters counters_{};
};

}  // namespace smg
