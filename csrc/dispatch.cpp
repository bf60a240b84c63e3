#include "dispatch.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace smg {

namespace {

const char* arch_name(Arch a) {
    switch (a) {
        case Arch::X86: return "x86";
        case Arch::Arm64: return "arm64";
        default: return "any";
    }
}

// A level's SMG_FAST_ISA name in the ladder of the architecture a kernel is compiled for (the
// portable kernels' level 0 is "baseline" in every ladder).
const char* cap_name(Arch a, int level) { return cap_ladder(a == Arch::Any ? kArch : a).names[level]; }

// Every row of a stage's table, lowest first, into the report.
template <class Fn, size_t N>
void report_stage(Stage s, const KernelRow<Fn> (&t)[N], DispatchReport& r) {
    const char* stage = kStageNames[int(s)];
    r.selected.emplace_back(stage, first_allowed(t).name);
    const uint32_t ran = g_kernels_ran[int(s)].load(std::memory_order_relaxed);
    for (size_t i = N; i-- > 0;) {
        const KernelRow<Fn>& k = t[i];
        r.kernels.push_back({stage, k.name, arch_name(k.arch), cap_name(k.arch, k.level), bool(ran >> k.id & 1u)});
    }
}

}  // namespace

const char* isa_cap_env() {
    static const std::string v = [] {
        const char* e = std::getenv("SMG_FAST_ISA");
        return std::string(e ? e : "");
    }();
    return v.empty() ? nullptr : v.c_str();
}

int isa_cap() {
    static const int cap = [] {
        const CapLadder ladder = cap_ladder(kArch);
        const char* v = isa_cap_env();
        if (!v || std::strcmp(v, "native") == 0) return ladder.size - 1;
        for (int level = 0; level < ladder.size; ++level)
            if (std::strcmp(v, ladder.names[level]) == 0) return level;
        return kBaseline;  // unknown: the safe choice (kernel_info shows it)
    }();
    return cap;
}

DispatchReport dispatch_report() {
    DispatchReport r;
    r.cap = cap_name(kArch, isa_cap());
    r.cap_env = isa_cap_env();
    for (const Feature& f : kFeatures) {
        const bool has = f.host();
        r.host.emplace_back(f.name, has);
        r.usable.emplace_back(f.name, has && f.arch == kArch && f.level <= isa_cap());
    }
    report_stage(Stage::ResampleVertical, kVerticalKernels, r);
    report_stage(Stage::ResampleHorizontal, kHorizontalKernels, r);
    report_stage(Stage::Patchify, kPatchifyKernels, r);
    report_stage(Stage::Expand, kExpandKernels, r);
    return r;
}

}  // namespace smg
