// The patchify stage's self-tuning (tune.hpp): which of the kernels a Normalizer has ready for a
// patch shape runs it fastest on this CPU, timed once per process per input class.
#pragma once

#include <cstddef>
#include <vector>

#include "patchify/layout.hpp"
#include "patchify/normalizer.hpp"

namespace smg {

// The index into candidates (at least two, best-first order) of the fastest for patches of side
// patch, merge and temporal in order, dtype dt (not UInt8) against table lut. The input class is
// the dtype, the shape, the order and each candidate's form (its prep label).
size_t tune_patchify(const std::vector<PatchifyChoice>& candidates, DType dt, const void* lut, int patch, int merge,
                     int temporal, PatchOrder order);

}  // namespace smg
