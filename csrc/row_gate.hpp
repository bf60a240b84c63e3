// Rows of an image that one thread is still producing (decoding) while others already consume
// the finished ones (Pipeline::run's overlap of a JPEG's decode with the resize).
#pragma once

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <mutex>

namespace smg {

class RowGate {
public:
    // Rows [0, rows) are final. Called by the producer only, with a growing count. Wakes the
    // waiters only once the least any of them waits for is there: a wake per published batch
    // would have them contend with the producer for the lock on every one.
    void publish(int rows) {
        bool wake;
        {
            std::lock_guard<std::mutex> lk(mu_);
            ready_ = rows;
            wake = ready_ >= wanted_;
            if (wake) wanted_ = INT_MAX;  // the ones still short register again
        }
        if (wake) cv_.notify_all();
    }
    // The producer stopped early (bad data): waiters stop waiting, their work is discarded.
    void fail() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            failed_ = true;
        }
        cv_.notify_all();
    }
    // Blocks until rows [0, rows) are final (true) or the producer failed (false).
    bool wait(int rows) {
        std::unique_lock<std::mutex> lk(mu_);
        while (!failed_ && ready_ < rows) {
            wanted_ = std::min(wanted_, rows);
            cv_.wait(lk);
        }
        return !failed_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int ready_ = 0;
    int wanted_ = INT_MAX;  // the fewest rows a waiter waits for
    bool failed_ = false;
};

}  // namespace smg
