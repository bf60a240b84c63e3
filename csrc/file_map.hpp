// A private (copy-on-write) mapping of a byte range of an open file that keeps no descriptor: the
// caller may close the file at once, and the mappings a process holds are not bounded by its
// descriptor limit (Python's mmap keeps a duplicate descriptor per mapping).
#pragma once

#include <cstddef>
#include <cstdint>

namespace smg {

struct FileMap {
    void* base = nullptr;  // the mapping (page aligned), nullptr when empty
    size_t length = 0;     // bytes mapped from base
    size_t skip = 0;       // bytes from base to the requested offset
};

// Maps [offset, offset + n) of fd readable and privately writable (writes never reach the file).
// n > 0, and the range within the file (pages past its end raise SIGBUS when touched). Returns
// false with errno set when mmap fails.
bool map_file(int fd, uint64_t offset, size_t n, FileMap& out);
// Unmaps m (idempotent on an empty map).
void unmap_file(FileMap& m);

}  // namespace smg
