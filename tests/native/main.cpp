// The kernel comparison binary: every SIMD kernel of the dispatch tables that this architecture
// compiles and this CPU runs (NEON on aarch64; SSE2, AVX2, AVX-512 on x86-64), against the
// portable kernel of its stage, byte for byte (docs/kernels.md, "The kernel comparison binary"). Exit status 1 on any
// mismatch, or when a stage has no SIMD kernel to compare on aarch64 or x86-64.
#include <cstdio>
#include <cstdlib>

#include "check.hpp"

namespace smg::native_test {

std::deque<Tally>& tallies() {
    static std::deque<Tally> t;
    return t;
}

Tally& tally(const std::string& stage, const std::string& kernel) {
    for (Tally& t : tallies())
        if (t.stage == stage && t.kernel == kernel) return t;
    tallies().push_back(Tally{stage, kernel});
    return tallies().back();
}

}  // namespace smg::native_test

int main(int argc, char** argv) {
    using namespace smg::native_test;
    const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
    const char* arch = smg::kArch == smg::Arch::Arm64 ? "arm64" : smg::kArch == smg::Arch::X86 ? "x86" : "any";
    std::printf("kernel comparison on %s, seed %llu\n", arch, static_cast<unsigned long long>(seed));
    test_vertical(seed);
    test_horizontal(seed + 1);
    test_patchify(seed + 2);
    test_expand(seed + 3);
    long failures = 0;
    bool stages[4] = {};
    for (const Tally& t : tallies()) {
        std::printf("%-22s %-12s %7ld cases %5ld handed back %ld mismatches\n", t.stage.c_str(), t.kernel.c_str(),
                    t.cases, t.skipped, t.failures);
        failures += t.failures;
        if (t.cases > 0) {
            stages[0] |= t.stage == "resample.vertical";
            stages[1] |= t.stage == "resample.horizontal";
            stages[2] |= t.stage == "patchify";
            stages[3] |= t.stage == "expand";
        }
    }
    const bool simd_arch = smg::kArch != smg::Arch::Any;
    // expand has SIMD kernels only with AVX-512 VBMI on x86-64 (and NEON on aarch64)
    const bool expand_simd = !simd_rows(smg::kExpandKernels).empty();
    if (simd_arch && !(stages[0] && stages[1] && stages[2] && (stages[3] || !expand_simd))) {
        std::printf("FAIL: a stage had no SIMD kernel to compare\n");
        return 1;
    }
    std::printf(failures ? "FAIL: %ld mismatches\n" : "OK\n", failures);
    return failures ? 1 : 0;
}
