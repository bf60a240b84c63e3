// The resampler's self-tuning (tune.hpp): which allowed row kernel runs each pass fastest on this
// CPU, timed once per process per input class on a small job of the resize that first meets it.
#pragma once

#include "dispatch.hpp"
#include "resample/passes.hpp"
#include "resample/weights.hpp"

namespace smg {

// The vertical kernel for weights kv: the first allowed row of the table, or with tuning on the
// fastest allowed row for kv's class (its weight form and tap count, to a power of two).
const KernelRow<VerticalRowFn>& choose_vertical(const AxisWeights& kv);

// The horizontal kernel and plan for weights kh over rows of in_w pixels of C channels written
// as CO: make_hplan's, or with tuning on the fastest of the allowed rows that take this resize,
// for its class (channels, weight form and tap count, to a power of two).
HPlan choose_hplan(const AxisWeights& kh, int in_w, int out_w, int C, int CO);

}  // namespace smg
