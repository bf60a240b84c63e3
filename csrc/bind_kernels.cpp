// Which kernels the ISA dispatch selects and which have run: cpu_features and kernel_info.
#include "bind_common.hpp"
#include "cpu.hpp"
#include "kernel_log.hpp"

namespace smg::bind {

namespace {

py::dict isa_dict(bool avx2, bool avx512, bool vbmi, bool vnni) {
    return py::dict(py::arg("avx2") = avx2, py::arg("avx512") = avx512, py::arg("avx512vbmi") = vbmi,
                    py::arg("avx512vnni") = vnni);
}

py::dict kernel_info_py() {
    // IsaLevel -> the SMG_FAST_ISA value of that cap.
    static const char* const kLevels[] = {"baseline", "avx2", "avx512-novnni", "avx512"};
    py::dict d;
    d["isa_cap"] = kLevels[isa_cap()];
    d["isa_cap_env"] = isa_cap_env() ? py::object(py::str(isa_cap_env())) : py::object(py::none());
    const HostIsa h = host_isa();
    d["host"] = isa_dict(h.avx2, h.avx512, h.avx512vbmi, h.avx512vnni);
    py::dict selected;
    for (KernelId id : {vertical_kernel(), horizontal_kernel(), patchify_kernel()})
        selected[kernel_desc(id).stage] = kernel_desc(id).name;
    d["selected"] = selected;
    // Every kernel, with the lowest SMG_FAST_ISA cap that admits it and whether it has run.
    py::list kernels;
    const uint32_t ran = g_kernels_ran.load(std::memory_order_relaxed);
    for (int i = 0; i < int(KernelId::Count); ++i) {
        const KernelDesc& k = kernel_desc(KernelId(i));
        kernels.append(py::dict(py::arg("stage") = k.stage, py::arg("name") = k.name,
                                py::arg("min_cap") = kLevels[k.level],
                                py::arg("ran") = bool(ran & (uint32_t(1) << i))));
    }
    d["kernels"] = kernels;
    return d;
}

}  // namespace

void bind_kernels(py::module_& m) {
    m.def(
        "cpu_features",
        [] { return isa_dict(cpu_has_avx2(), cpu_has_avx512(), cpu_has_avx512vbmi(), cpu_has_avx512vnni()); },
        "The instruction sets the kernels use, after the SMG_FAST_ISA cap.");
    m.def("kernel_info", &kernel_info_py,
          "The ISA cap in force (SMG_FAST_ISA), what the CPU supports, the kernel each stage's\n"
          "dispatch selects, and every kernel that has run in this process, with the level it needs.");
}

}  // namespace smg::bind
