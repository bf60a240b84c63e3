#include "slot_arena.hpp"

#include <sys/mman.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "parallel.hpp"

namespace smg {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kCopyGrain = size_t(1) << 20;  // parallel copy-in in 1 MiB pieces

void put_u64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace

uint64_t key_hash(const std::string& key) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : key) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h;
}

SlotArena::SlotArena(size_t slots, size_t slot_bytes, double ttl_s)
    : slots_(slots), slot_bytes_(slot_bytes), ttl_s_(ttl_s), table_(slots) {
    if (slots == 0 || slot_bytes < kFrameHeader + kFrameTrailer + 8 || slot_bytes % 64 != 0 || !(ttl_s > 0))
        throw std::invalid_argument(
            "slot arena: need slots >= 1, slot_bytes >= 80 and a multiple "
            "of 64, ttl_s > 0");
    if (slot_bytes > (SIZE_MAX / 2) / slots) throw std::bad_alloc();
    void* p = mmap(nullptr, size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<uint8_t*>(p);
#ifdef MADV_HUGEPAGE
    madvise(base_, size(), MADV_HUGEPAGE);
#endif
    // Fault every page in now: first touch costs ~2 GB/s and must not land on a request.
    const size_t n = size();
    parallel_for(int64_t((n + kCopyGrain - 1) / kCopyGrain), 1, [&](int64_t b, int64_t e) {
        for (size_t off = size_t(b) * kCopyGrain; off < std::min(n, size_t(e) * kCopyGrain); off += kPage)
            base_[off] = 0;
    });
    free_list_.reserve(slots);
    for (size_t i = slots; i-- > 0;) free_list_.push_back(i);  // slot 0 is leased first
}

// Each lease draws its generation from the kernel's CSPRNG: a reader compares it with payload
// bytes that may cover an old trailer (small counters are values real tensors contain), and a
// client that saw one generation must not be able to predict another lease's.
uint64_t SlotArena::fresh_generation(uint64_t previous) {
    for (;;) {
        uint64_t g = 0;
        size_t got = 0;
        while (got < sizeof g) {
            const ssize_t r = getrandom(reinterpret_cast<uint8_t*>(&g) + got, sizeof g - got, 0);
            if (r > 0)
                got += size_t(r);
            else if (errno != EINTR)
                throw std::runtime_error("getrandom failed");
        }
        if (g != 0 && g != previous) return g;  // 0 marks an invalidated trailer
    }
}

SlotArena::~SlotArena() {
    if (base_ != nullptr) munmap(base_, size());
}

SlotLease SlotArena::lease(const std::string& key, size_t payload_len) {
    std::lock_guard<std::mutex> lock(mu_);
    if (payload_len > max_payload() || frame_bytes(payload_len) > slot_bytes_) {
        ++counters_.too_large;
        throw std::length_error("payload of " + std::to_string(payload_len) + " bytes does not fit a slot (at most " +
                                std::to_string(max_payload()) + ")");
    }
    if (by_key_.count(key) != 0) throw std::invalid_argument("key already holds a slot");
    SlotLease out;
    if (free_list_.empty()) reap_locked(Clock::now());
    if (free_list_.empty()) {
        ++counters_.full;
        return out;
    }
    const size_t s = free_list_.back();
    Slot& slot = table_[s];
    // Drawn before any state changes: if getrandom fails (throws), the slot stays free.
    const uint64_t generation = fresh_generation(slot.generation);
    std::string owned = key;  // may throw bad_alloc, as the emplace: also before the slot is taken
    by_key_.emplace(key, s);
    free_list_.pop_back();
    slot.busy = true;
    slot.committed = false;
    slot.generation = generation;
    slot.since = Clock::now();
    slot.key = std::move(owned);
    ++counters_.leased;
    ++counters_.in_use;

    out.slot = int64_t(s);
    out.generation = slot.generation;
    out.frame_offset = s * slot_bytes_;
    out.frame_len = frame_bytes(payload_len);
    out.payload_offset = out.frame_offset + kFrameHeader;
    out.payload_len = payload_len;
    // The header goes in first: from now on a reader holding an older generation of this slot
    // sees a mismatch, and nobody can hold this generation before commit.
    uint8_t* h = base_ + out.frame_offset;
    // Zero the previous frame's trailer first: a reader still copying that frame (its lease was
    // reaped) then sees a generation mismatch even if it read the old header before this lease.
    uint64_t magic = 0, old_len = 0;
    std::memcpy(&magic, h, 8);
    std::memcpy(&old_len, h + 24, 8);
    if (magic == kFrameMagic && old_len <= max_payload()) put_u64(h + kFrameHeader + ((old_len + 7) & ~uint64_t(7)), 0);
    std::memset(h, 0, kFrameHeader);
    put_u64(h, kFrameMagic);
    put_u32(h + 8, kFrameVersion);
    put_u64(h + 16, slot.generation);
    put_u64(h + 24, payload_len);
    put_u64(h + 32, key_hash(key));
    return out;
}

bool SlotArena::commit(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return false;
    Slot& slot = table_[it->second];
    uint8_t* frame = base_ + it->second * slot_bytes_;
    uint64_t payload_len;
    std::memcpy(&payload_len, frame + 24, 8);
    const size_t padded = (payload_len + 7) & ~uint64_t(7);
    std::memset(frame + kFrameHeader + payload_len, 0, padded - payload_len);
    put_u64(frame + kFrameHeader + padded, slot.generation);
    slot.committed = true;
    slot.since = Clock::now();
    ++counters_.committed;
    return true;
}

void SlotArena::release_locked(size_t s) {
    Slot& slot = table_[s];
    by_key_.erase(slot.key);
    slot.busy = false;
    slot.committed = false;
    slot.key.clear();
    free_list_.push_back(s);
    --counters_.in_use;
}

bool SlotArena::free(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) {
        ++counters_.unknown_free;
        return false;
    }
    if (!table_[it->second].committed) {
        ++counters_.refused_free;
        return false;
    }
    release_locked(it->second);
    ++counters_.freed;
    return true;
}

bool SlotArena::abort(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return false;
    release_locked(it->second);
    ++counters_.freed;
    return true;
}

size_t SlotArena::reap_locked(Clock::time_point now) {
    const auto ttl = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s_));
    size_t n = 0;
    for (size_t s = 0; s < slots_; ++s) {
        // Only committed leases: an uncommitted one belongs to a producer still writing into it
        // (its failure path frees it), and handing its slot to another writer would mix bytes.
        if (table_[s].busy && table_[s].committed && now - table_[s].since >= ttl) {
            release_locked(s);
            ++n;
        }
    }
    counters_.reaped += n;
    return n;
}

size_t SlotArena::reap() {
    std::lock_guard<std::mutex> lock(mu_);
    return reap_locked(Clock::now());
}

size_t SlotArena::reap_after(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    return reap_locked(Clock::now() +
                       std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

SlotLease SlotArena::copy_in(const std::string& key, const void* src, size_t n) {
    SlotLease l = lease(key, n);
    if (l.slot < 0) return l;
    uint8_t* dst = base_ + l.payload_offset;
    const auto* s = static_cast<const uint8_t*>(src);
    parallel_for(int64_t((n + kCopyGrain - 1) / kCopyGrain), 1, [&](int64_t b, int64_t e) {
        const size_t lo = size_t(b) * kCopyGrain, hi = std::min(n, size_t(e) * kCopyGrain);
        std::memcpy(dst + lo, s + lo, hi - lo);
    });
    if (!commit(key)) l.slot = -1;  // reaped meanwhile (TTL shorter than a copy): treat as full
    return l;
}

ArenaCounters SlotArena::counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
}

}  // namespace smg
