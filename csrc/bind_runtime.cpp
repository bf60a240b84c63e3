// The runtime the kernels share (pooled scratch memory, the thread pool's size) and file mappings
// that keep no descriptor.
#include <cerrno>
#include <limits>
#include <memory>

#include "bind_common.hpp"
#include "file_map.hpp"
#include "parallel.hpp"
#include "scratch.hpp"

namespace smg::bind {

namespace {

// A 1-D uint8 array of n bytes backed by a pooled block; the block goes back to the pool of the
// thread that took it, whichever thread drops the last reference.
py::array pooled_empty(int64_t n, bool zero, bool huge_pages) {
    if (n < 0) throw py::value_error("pooled_empty: negative size");
    const Block b = [&] {
        py::gil_scoped_release release;
        return scratch_take(size_t(n), zero, huge_pages);
    }();
    py::capsule owner(new Block(b), [](void* p) {
        auto* blk = static_cast<Block*>(p);
        scratch_give(*blk);
        delete blk;
    });
    return py::array_t<uint8_t>({n}, {1}, static_cast<uint8_t*>(b.data), owner);
}

// n bytes of fd from offset as a 1-D uint8 array over a private mapping that holds no descriptor;
// the mapping goes when the last view of it does. The range must lie within the file: touching
// pages past its end raises SIGBUS (the caller checks the file's size first).
py::array map_file_py(int fd, int64_t offset, int64_t n) {
    if (fd < 0 || offset < 0 || n < 1) throw py::value_error("map_file: need fd >= 0, offset >= 0 and nbytes >= 1");
    if (uint64_t(n) > uint64_t(std::numeric_limits<int64_t>::max() - offset))
        throw py::value_error("map_file: offset + nbytes overflows");
    FileMap m;
    bool ok;
    int err = 0;
    {
        py::gil_scoped_release release;
        ok = map_file(fd, uint64_t(offset), size_t(n), m);
        if (!ok) err = errno;
    }
    if (!ok) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        throw py::error_already_set();
    }
    auto owned = std::make_unique<FileMap>(m);  // unmapped here if the capsule cannot be made
    struct Unmap {
        FileMap* m;
        ~Unmap() {
            if (m != nullptr) unmap_file(*m);
        }
    } guard{owned.get()};
    py::capsule owner(owned.get(), [](void* p) {
        auto* fm = static_cast<FileMap*>(p);
        unmap_file(*fm);
        delete fm;
    });
    guard.m = nullptr;
    owned.release();
    return py::array_t<uint8_t>({n}, {1}, static_cast<uint8_t*>(m.base) + m.skip, owner);
}

py::dict stats_py() {
    const ScratchStats s = scratch_stats();
    return int_dict({{"hits", s.hits},
                     {"misses", s.misses},
                     {"gives", s.gives},
                     {"drops", s.drops},
                     {"remote_gives", s.remote_gives},
                     {"pooled_bytes", s.pooled_bytes},
                     {"live_bytes", s.live_bytes},
                     {"cap_bytes", scratch_cap()},
                     {"total_cap_bytes", scratch_total_cap()},
                     {"thread_pooled_bytes", scratch_thread_pooled()}});
}

}  // namespace

void bind_runtime(py::module_& m) {
    m.def("map_file", &map_file_py, py::arg("fd"), py::arg("offset"), py::arg("nbytes"),
          "nbytes of the open file fd from offset as a writable uint8 array over a private\n"
          "(copy-on-write) mapping that keeps no descriptor: fd may be closed at once. The range must\n"
          "lie within the file (touching pages past its end raises SIGBUS). OSError when mmap fails.");
    m.def("pooled_empty", &pooled_empty, py::arg("nbytes"), py::arg("zero") = false, py::arg("huge_pages") = true,
          "A 1-D uint8 array of nbytes from the calling thread's scratch pool (zero-filled if zero);\n"
          "its memory returns to that pool when the array is dropped, from any thread. huge_pages=False\n"
          "for arrays the caller may keep: a new block is then not advised for huge pages.");
    m.def("scratch_stats", &stats_py, "Counters of the scratch pools (hits, misses, bytes pooled and live, caps).");
    m.def("scratch_release", &scratch_release, "Frees every block pooled by the calling thread.");
    m.def("scratch_set_cap", &scratch_set_cap, py::arg("bytes"), "Per-thread cap on pooled scratch bytes.");
    m.def("scratch_set_total_cap", &scratch_set_total_cap, py::arg("bytes"),
          "Process-wide cap on pooled scratch bytes (all threads).");
    m.def(
        "set_num_threads",
        [](int n) {
            py::gil_scoped_release release;
            set_num_threads(n);
        },
        py::arg("n"), "Threads the native kernels may use, the caller included (n < 1: every available CPU).");
    m.def("num_threads", &num_threads, "Threads the native kernels may use, the caller included.");
    m.def("available_cpus", &available_cpus, "CPUs this process may run on (its affinity mask).");
}

}  // namespace smg::bind
