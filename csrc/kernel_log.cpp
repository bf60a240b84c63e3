#include "kernel_log.hpp"

namespace smg {

const KernelDesc& kernel_desc(KernelId id) {
    static const KernelDesc table[int(KernelId::Count)] = {
        {"resample.vertical", "scalar", kIsaBaseline},
        {"resample.vertical", "sse2", kIsaBaseline},
        {"resample.vertical", "avx2", kIsaAvx2},
        {"resample.vertical", "avx512", kIsaAvx512},
        {"resample.horizontal", "scalar", kIsaBaseline},
        {"resample.horizontal", "sse2", kIsaBaseline},
        {"resample.horizontal", "avx2", kIsaAvx2},
        {"resample.horizontal", "avx512vbmi", kIsaAvx512},
        {"resample.horizontal", "avx512vnni", kIsaAvx512Vnni},
        {"patchify", "table", kIsaBaseline},
        {"patchify", "avx2", kIsaAvx2},
        {"patchify", "avx512vbmi", kIsaAvx512},
    };
    return table[int(id)];
}

}  // namespace smg
