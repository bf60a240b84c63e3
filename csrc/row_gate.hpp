// Rows of an image that one thread is still producing (decoding) while others already consume
// the finished ones (Pipeline::run's overlap of a JPEG's decode with the resize).
#pragma once

#include <condition_variable>
#include <mutex>

namespace smg {

class RowGate {
public:
    // Rows [0, rows) are final. Called by the producer only, with a growing count.
    void publish(int rows) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            ready_ = rows;
        }
        cv_.notify_all();
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
        cv_.wait(lk, [&] { return failed_ || ready_ >= rows; });
        return !failed_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int ready_ = 0;
    bool failed_ = false;
};

}  // namespace smg
