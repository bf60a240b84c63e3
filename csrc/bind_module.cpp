// The module smg_fast._native. The bind_*.cpp files are its only pybind11 code: they convert and
// check arguments, release the GIL, and call plain C++.
#include "bind_common.hpp"
#include "parallel.hpp"
#include "resample/resizer.hpp"
#include "scratch.hpp"
#include "tune.hpp"

#ifndef SMG_FAST_VERSION
#error "SMG_FAST_VERSION must be defined by the build (setup.py reads src/smg_fast/_version.py)"
#endif

PYBIND11_MODULE(_native, m) {
    m.doc() =
        "smg-fast native core: Pillow-exact resampling, fused normalize + patchify, pooled buffers,\n"
        "the RDMA slot arena. Plain C++ below this module; see _native.pyi for the types.";
    m.attr("__version__") = SMG_FAST_VERSION;
    // One-time state made before any fork. Order matters: fork() runs the prepare handlers in the
    // reverse order of their installation, so the tuning lock, installed last, is taken first.
    // A class being timed takes the scratch registry and pool locks under it; fork() taking those
    // first and then waiting for the tuning lock would wait forever (tune.hpp).
    smg::install_pool_fork_handlers();
    smg::install_scratch_fork_handlers();
    smg::install_shape_cache_fork_handlers();  // a leaf lock: its place in the order is free
    smg::tune_init();
    using namespace smg::bind;
    bind_enums(m);
    bind_pipeline(m);
    bind_resize(m);
    bind_decode(m);
    bind_runtime(m);
    bind_kernels(m);
    bind_slot_arena(m);
}
