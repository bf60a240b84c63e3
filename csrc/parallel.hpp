// A small native thread pool. Work is split into index ranges whose results do not depend on
// which thread runs them, so output is bit-identical for any thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace smg {

// Number of threads parallel_for may use (the caller counts as one). n < 1 means "all CPUs this
// process may use".
void set_num_threads(int n);
int num_threads();

// Runs fn(begin, end) over [0, n) in chunks of `grain` indices. Blocks until every chunk ran.
// If the pool is busy with another caller's job, the caller runs its chunks alone: no deadlock,
// no oversubscription. The first exception thrown by fn is rethrown here.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Registers fork() handlers once: a fork waits for a pool being made, and a forked child forgets
// the parent's workers (it runs every job on the calling thread). Called at module import, before
// any thread can fork; the pool's first use calls it too.
void install_pool_fork_handlers();

// CPUs this process may run on (sched_getaffinity), at least 1.
int available_cpus();

// Marks a call doing native work (a pipeline run, a JPEG decode) for its lifetime, so that
// work_in_flight() counts them across threads. Optional parallelism that costs extra work (a
// JPEG's row bands) is taken only when its call is the only one: a busy process would pay for
// it in throughput.
class WorkScope {
public:
    WorkScope();
    ~WorkScope();
    WorkScope(const WorkScope&) = delete;
    WorkScope& operator=(const WorkScope&) = delete;
};
int work_in_flight();

}  // namespace smg
