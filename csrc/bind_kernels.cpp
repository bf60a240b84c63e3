// Which kernels the dispatch tables select and which have run: cpu_features and kernel_info.
#include <utility>
#include <vector>

#include "bind_common.hpp"
#include "dispatch.hpp"
#include "tune.hpp"

namespace smg::bind {

namespace {

py::dict flags(const std::vector<std::pair<const char*, bool>>& named) {
    py::dict d;
    for (const auto& [name, on] : named) d[name] = on;
    return d;
}

py::dict kernel_info_py() {
    const DispatchReport r = dispatch_report();
    py::dict d;
    d["isa_cap"] = r.cap;
    d["isa_cap_env"] = r.cap_env ? py::object(py::str(r.cap_env)) : py::object(py::none());
    d["host"] = flags(r.host);
    py::dict selected;
    for (const auto& [stage, name] : r.selected) selected[stage] = name;
    d["selected"] = selected;
    py::list kernels;
    for (const KernelReport& k : r.kernels)
        kernels.append(py::dict(py::arg("stage") = k.stage, py::arg("name") = k.name, py::arg("arch") = k.arch,
                                py::arg("min_cap") = k.min_cap, py::arg("ran") = k.ran));
    d["kernels"] = kernels;
    py::dict tuning;
    tuning["enabled"] = tuning_enabled();
    tuning["env"] = tune_env() ? py::object(py::str(tune_env())) : py::object(py::none());
    py::list choices;
    for (const TuneRecord& t : tune_records()) {
        py::dict us;
        for (const auto& [name, median] : t.median_us) us[py::str(name)] = median;
        choices.append(py::dict(py::arg("stage") = kStageNames[int(t.stage)], py::arg("key") = t.key,
                                py::arg("kernel") = t.chosen, py::arg("median_us") = us));
    }
    tuning["choices"] = choices;
    d["tuning"] = tuning;
    return d;
}

}  // namespace

void bind_kernels(py::module_& m) {
    m.def(
        "cpu_features", [] { return flags(dispatch_report().usable); },
        "The instruction sets the kernels use, after the SMG_FAST_ISA cap.");
    m.def("kernel_info", &kernel_info_py,
          "The ISA cap in force (SMG_FAST_ISA), what the CPU supports, the kernel each stage's\n"
          "dispatch selects, every kernel that has run in this process, with the level it needs, and\n"
          "the self-tuned choices (SMG_FAST_TUNE) with the timings they came from.");
}

}  // namespace smg::bind
