#include "parallel.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace smg {

namespace {

std::atomic<int> g_work_in_flight{0};  // WorkScope's count

class Pool;
// The pool, made at first use and never destroyed (workers may outlive static teardown). Its
// making holds g_pool_mu, which fork() takes (install_pool_fork_handlers): a child never
// inherits a pool half made by a thread it lacks.
std::mutex g_pool_mu;
std::atomic<Pool*> g_pool{nullptr};

class Pool {
public:
    static Pool& get() {
        Pool* pool = g_pool.load(std::memory_order_acquire);
        if (pool) return *pool;
        install_pool_fork_handlers();
        std::lock_guard<std::mutex> lk(g_pool_mu);
        pool = g_pool.load(std::memory_order_relaxed);
        if (!pool) {
            pool = new Pool();
            g_pool.store(pool, std::memory_order_release);
        }
        return *pool;
    }

    int size() {
        std::lock_guard<std::mutex> lk(config_mu_);
        return size_;
    }

    void resize(int n) {
        std::lock_guard<std::mutex> cfg(config_mu_);
        std::lock_guard<std::mutex> use(use_mu_);
        stop_workers();
        size_ = std::max(1, n);
        start_workers();
    }

    void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
        if (n <= 0) return;
        grain = std::max<int64_t>(1, grain);
        const int64_t chunks = (n + grain - 1) / grain;
        std::unique_lock<std::mutex> use(use_mu_, std::try_to_lock);
        if (!use.owns_lock() || workers_.empty() || chunks == 1) {
            fn(0, n);
            return;
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            job_ = &fn;
            n_ = n;
            grain_ = grain;
            next_.store(0);
            pending_ = static_cast<int>(workers_.size());
            error_ = nullptr;
            ++generation_;
        }
        cv_.notify_all();
        work();
        std::unique_lock<std::mutex> lk(mu_);
        done_cv_.wait(lk, [&] { return pending_ == 0; });
        job_ = nullptr;
        if (error_) std::rethrow_exception(error_);
    }

    // After fork() the child has no worker threads: forget them without joining.
    void forget_after_fork() {
        workers_.clear();  // the std::thread objects were leaked on purpose (see start_workers)
        new (&mu_) std::mutex();
        new (&use_mu_) std::mutex();
        new (&config_mu_) std::mutex();
        new (&cv_) std::condition_variable();
        new (&done_cv_) std::condition_variable();
        stop_ = false;
        job_ = nullptr;
        g_work_in_flight.store(0);  // the other threads' calls did not come along
    }

private:
    Pool() {
        int n = 0;
        if (const char* env = std::getenv("SMG_FAST_NUM_THREADS")) n = std::atoi(env);
        size_ = n > 0 ? n : available_cpus();
        start_workers();
    }

    void start_workers() {
        stop_ = false;
        uint64_t gen;
        {
            std::lock_guard<std::mutex> lk(mu_);
            gen = generation_;
        }
        for (int i = 1; i < size_; ++i) {
            // Heap-allocated and never deleted so a forked child can drop them safely. Each
            // worker starts from the current generation so it cannot miss the first job.
            workers_.push_back(new std::thread([this, gen] { loop(gen); }));
        }
    }

    void stop_workers() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
            ++generation_;
        }
        cv_.notify_all();
        for (std::thread* t : workers_) {
            t->join();
            delete t;
        }
        workers_.clear();
    }

    void work() {
        for (;;) {
            const int64_t b = next_.fetch_add(grain_);
            if (b >= n_) return;
            try {
                (*job_)(b, std::min(n_, b + grain_));
            } catch (...) {
                std::lock_guard<std::mutex> lk(mu_);
                if (!error_) error_ = std::current_exception();
            }
        }
    }

    void loop(uint64_t seen) {
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] { return generation_ != seen; });
                seen = generation_;
                if (stop_) return;
            }
            work();
            std::lock_guard<std::mutex> lk(mu_);
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }

    std::mutex config_mu_;  // serializes resize()
    std::mutex use_mu_;     // held by the caller whose job the pool is running
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    std::vector<std::thread*> workers_;
    int size_ = 1;
    bool stop_ = false;
    uint64_t generation_ = 0;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t n_ = 0, grain_ = 1;
    std::atomic<int64_t> next_{0};
    int pending_ = 0;
    std::exception_ptr error_;
};

}  // namespace

void install_pool_fork_handlers() {
    static const bool installed = [] {
        pthread_atfork([] { g_pool_mu.lock(); }, [] { g_pool_mu.unlock(); },
                       [] {
                           g_pool_mu.unlock();
                           if (Pool* pool = g_pool.load(std::memory_order_relaxed)) pool->forget_after_fork();
                       });
        return true;
    }();
    (void)installed;
}

WorkScope::WorkScope() { g_work_in_flight.fetch_add(1, std::memory_order_relaxed); }
WorkScope::~WorkScope() { g_work_in_flight.fetch_sub(1, std::memory_order_relaxed); }
int work_in_flight() { return g_work_in_flight.load(std::memory_order_relaxed); }

int available_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? static_cast<int>(hw) : 1;
}

void set_num_threads(int n) { Pool::get().resize(n > 0 ? n : available_cpus()); }

int num_threads() { return Pool::get().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    Pool::get().run(n, grain, fn);
}

}  // namespace smg
