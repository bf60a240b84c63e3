// Self-tuning dispatch: where a stage has more than one allowed kernel for an input class, each is
// timed once per process on a small job of that class at its first use, and the fastest (median of
// 15 rounds; the table's first candidate unless another is more than 10% faster) is what the
// class runs from then on. Every kernel computes identical output, so the choice changes only
// speed. SMG_FAST_TUNE=0 (read once) keeps the tables' fixed order.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch.hpp"

namespace smg {

// SMG_FAST_TUNE as set, or nullptr when unset or empty; read once.
const char* tune_env();
// Tuning is on unless SMG_FAST_TUNE is "0".
bool tuning_enabled();
// Makes the tuning table (registering its fork() handlers) and reads SMG_FAST_TUNE: called at
// module import, so that no fork can overlap their one-time making (a child would wait forever
// on it), and after every other fork() handler is installed: fork() must take the tuning lock
// before any lock a timed job may take (the scratch registry's, the pool's), as the job does.
void tune_init();

// One input class's choice and the timings it came from.
struct TuneRecord {
    Stage stage;
    std::string key;                                        // the input class
    std::string chosen;                                     // the candidate that was fastest
    std::vector<std::pair<std::string, double>> median_us;  // per candidate, in the order timed
};

// The index of the fastest of names for (stage, key): timed on the first call for that pair (run(i)
// runs candidate i once on the class's job; reset(), untimed, runs before each run), cached for
// every later one. Calls for the same pair from many threads at once time it once; every caller
// gets the same answer.
size_t tune_once(Stage stage, const std::string& key, const std::vector<std::string>& names,
                 const std::function<void()>& reset, const std::function<void(size_t)>& run);

// The candidate chosen for (stage, key) so far, or "" when the class has not been timed.
std::string tune_lookup(Stage stage, const std::string& key);

// Every choice made so far, in the order made.
std::vector<TuneRecord> tune_records();

}  // namespace smg
