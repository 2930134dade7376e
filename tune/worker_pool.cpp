#include "tune/worker_pool.h"

#include <fmt/format.h>

namespace hfta::tune {
namespace {

std::string resultKey(int64_t array) { return fmt::format("tune/result/{}", array); }

}  // namespace

WorkerPool::WorkerPool(int rank, int size, c10::intrusive_ptr<c10d::Store> store)
    : rank_(rank), size_(size), store_(std::move(store)) {}

std::optional<int64_t> WorkerPool::claim(int64_t first, int64_t count, const std::function<bool(int64_t)>& done) {
  const auto me = std::to_string(rank_);
  for (int64_t array = first; array < first + count; ++array) {
    if (done(array)) continue;
    const auto holder = store_->compareSet(fmt::format("tune/claim/{}", array), "", me);
    if (holder == me && !result(array)) return array;
  }
  return std::nullopt;
}

void WorkerPool::post(int64_t array, const std::string& entry) { store_->set(resultKey(array), entry); }

std::optional<std::string> WorkerPool::result(int64_t array) const {
  if (!store_->check({resultKey(array)})) return std::nullopt;
  return store_->get_to_str(resultKey(array));
}

int64_t WorkerPool::fromRankZero(const std::string& key, const std::function<int64_t()>& compute) {
  const auto full = "tune/rank0/" + key;
  if (rank_ == 0) {
    const int64_t value = compute();
    store_->set(full, std::to_string(value));
    return value;
  }
  // Rank 0 may measure for minutes first.
  store_->wait({full}, std::chrono::hours(2));
  return std::stoll(store_->get_to_str(full));
}

}  // namespace hfta::tune
