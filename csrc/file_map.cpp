#include "file_map.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace smg {

bool map_file(int fd, uint64_t offset, size_t n, FileMap& out) {
    const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    const uint64_t start = offset - offset % page;
    const size_t skip = size_t(offset - start);
    void* p = mmap(nullptr, n + skip, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, off_t(start));
    if (p == MAP_FAILED) return false;
    out.base = p;
    out.length = n + skip;
    out.skip = skip;
    return true;
}

void unmap_file(FileMap& m) {
    if (m.base != nullptr) munmap(m.base, m.length);
    m.base = nullptr;
    m.length = 0;
}

}  // namespace smg
