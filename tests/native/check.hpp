// What the kernel comparison binary's checks share: a seeded generator, buffers that end at an
// unmapped page (a read or write past the end faults, under QEMU too), the SIMD rows of a dispatch
// table that this host runs, and the tally of cases and mismatches.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "dispatch.hpp"

namespace smg::native_test {

// xorshift64*: the same sequence on every host for a seed.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull | 1) {}
    uint64_t next() {
        s_ ^= s_ >> 12;
        s_ ^= s_ << 25;
        s_ ^= s_ >> 27;
        return s_ * 0x2545F4914F6CDD1Dull;
    }
    // Uniform in [lo, hi].
    int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }
    uint8_t byte() { return uint8_t(next() >> 56); }

private:
    uint64_t s_;
};

// n bytes whose last one is followed by a page with no access.
class Guarded {
public:
    explicit Guarded(size_t n) : n_(n) {
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        total_ = (n + page - 1) / page * page + page;
        void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) std::abort();
        base_ = static_cast<uint8_t*>(p);
        if (mprotect(base_ + total_ - page, page, PROT_NONE) != 0) std::abort();
        data_ = base_ + (total_ - page) - n;
    }
    ~Guarded() { munmap(base_, total_); }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
    uint8_t* data() const { return data_; }
    size_t size() const { return n_; }

private:
    size_t n_, total_;
    uint8_t* base_;
    uint8_t* data_;
};

// The rows of table t other than the portable last one that this architecture compiles and this
// CPU runs (the SMG_FAST_ISA cap aside: every kernel the host can run is compared).
template <class Fn, size_t N>
std::vector<const KernelRow<Fn>*> simd_rows(const KernelRow<Fn> (&t)[N]) {
    std::vector<const KernelRow<Fn>*> out;
    for (size_t i = 0; i + 1 < N; ++i)
        if (t[i].arch == kArch && t[i].available()) out.push_back(&t[i]);
    return out;
}

// Cases compared and mismatches found, per stage and kernel; the first few mismatches are printed.
struct Tally {
    std::string stage, kernel;
    long cases = 0, skipped = 0, failures = 0;

    void check(bool equal, const std::string& what) {
        ++cases;
        if (equal) return;
        if (++failures <= 10) std::printf("MISMATCH %s/%s: %s\n", stage.c_str(), kernel.c_str(), what.c_str());
    }
};

// The tallies of every check, in the order run.
std::deque<Tally>& tallies();
Tally& tally(const std::string& stage, const std::string& kernel);

void test_vertical(uint64_t seed);
void test_horizontal(uint64_t seed);
void test_patchify(uint64_t seed);
void test_expand(uint64_t seed);

}  // namespace smg::native_test
