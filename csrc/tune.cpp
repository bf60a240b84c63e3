#include "tune.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include <pthread.h>

namespace smg {

namespace {

// Timed rounds per candidate (after one warm-up run), interleaved. On shared vCPUs a run takes
// one of two times about 2x apart, in no order (measured: the same kernel 17 or 46 us, slow in 30-70%
// of runs): a median of 5 fell in the fast mode for one candidate and the slow for another often
// enough to pick a 1.5x slower kernel now and then; 15 keep each median in its kernel's usual mode.
constexpr int kRounds = 15;
constexpr double kMargin = 1.1;  // how much faster than the first candidate another must be

struct TuneTable {
    std::mutex timing;  // held while a class is timed: one at a time, none timed against another
    std::mutex mu;      // the index and the records (held briefly: lookups never wait for a timing)
    std::map<std::pair<int, std::string>, size_t> index;  // (stage, key) -> records position
    std::vector<TuneRecord> records;
};

TuneTable& table() {
    // Never destroyed: kernels may run during exit. fork() waits for a class being timed and takes
    // the table (timing, then mu, as tune_once does), so a forked child never inherits a lock held
    // by a thread it lacks, nor the table half-written; both sides release them after.
    static TuneTable* t = [] {
        auto* tt = new TuneTable;
        pthread_atfork(
            [] {
                table().timing.lock();
                table().mu.lock();
            },
            [] {
                table().mu.unlock();
                table().timing.unlock();
            },
            [] {
                table().mu.unlock();
                table().timing.unlock();
            });
        return tt;
    }();
    return *t;
}

// The position of names' choice for (stage, key) in names (0 if that is not among them), or -1
// when the class has not been timed. Takes t.mu.
int64_t chosen_at(TuneTable& t, Stage stage, const std::string& key, const std::vector<std::string>& names) {
    const std::lock_guard<std::mutex> lock(t.mu);
    const auto found = t.index.find({int(stage), key});
    if (found == t.index.end()) return -1;
    const std::string& chosen = t.records[found->second].chosen;
    const size_t at = size_t(std::find(names.begin(), names.end(), chosen) - names.begin());
    return at < names.size() ? int64_t(at) : 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

const char* tune_env() {
    static const std::string v = [] {
        const char* e = std::getenv("SMG_FAST_TUNE");
        return std::string(e ? e : "");
    }();
    return v.empty() ? nullptr : v.c_str();
}

bool tuning_enabled() {
    static const bool on = [] {
        const char* v = tune_env();
        return !(v && std::string(v) == "0");
    }();
    return on;
}

void tune_init() {
    table();
    tuning_enabled();
}

size_t tune_once(Stage stage, const std::string& key, const std::vector<std::string>& names,
                 const std::function<void()>& reset, const std::function<void(size_t)>& run) {
    TuneTable& t = table();
    if (const int64_t at = chosen_at(t, stage, key, names); at >= 0) return size_t(at);
    // Held while timing: a second first user of the key waits for the answer rather than timing
    // again (and a first user of another key does not time against this one).
    const std::lock_guard<std::mutex> timing(t.timing);
    if (const int64_t at = chosen_at(t, stage, key, names); at >= 0) return size_t(at);
    const size_t n = names.size();
    for (size_t i = 0; i < n; ++i) {  // warm-up: code and tables in cache, pages touched
        reset();
        run(i);
    }
    std::vector<std::vector<double>> us(n);
    for (int round = 0; round < kRounds; ++round)
        for (size_t i = 0; i < n; ++i) {
            reset();
            const auto t0 = std::chrono::steady_clock::now();
            run(i);
            const auto t1 = std::chrono::steady_clock::now();
            us[i].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
    TuneRecord r{stage, key, "", {}};
    size_t best = 0;
    for (size_t i = 0; i < n; ++i) {
        r.median_us.emplace_back(names[i], median(us[i]));
        if (r.median_us[i].second < r.median_us[best].second) best = i;  // ties: the earlier row
    }
    // The first candidate (the table's fixed order) unless another beats it by more than
    // kMargin: near ties go whichever way the noise does, process to process.
    if (r.median_us[best].second * kMargin >= r.median_us[0].second) best = 0;
    r.chosen = names[best];
    const std::lock_guard<std::mutex> lock(t.mu);
    // The record first: if either insertion throws, no index entry names a missing record.
    t.records.push_back(std::move(r));
    try {
        t.index.emplace(std::make_pair(int(stage), key), t.records.size() - 1);
    } catch (...) {
        t.records.pop_back();
        throw;
    }
    return best;
}

std::string tune_lookup(Stage stage, const std::string& key) {
    TuneTable& t = table();
    const std::lock_guard<std::mutex> lock(t.mu);
    const auto found = t.index.find({int(stage), key});
    return found == t.index.end() ? std::string() : t.records[found->second].chosen;
}

std::vector<TuneRecord> tune_records() {
    TuneTable& t = table();
    const std::lock_guard<std::mutex> lock(t.mu);
    return t.records;
}

}  // namespace smg
