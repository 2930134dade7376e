#pragma once
// The workers of one tuning run (hfta-tune under torchrun, or with
// --workers N) and what they share: c10d's TCPStore, nothing else. Every
// worker runs the same search: the algorithm is deterministic given the
// arrays' results, so every worker plans the same arrays, round after
// round. A round's arrays are shared out through the store (a worker
// claims an array with the store's compare-and-set, trains it, posts its
// result under the array's key), and every worker reads all of the round's
// results before the algorithm goes on. Rank 0 measures the array size and the others take
// its plan. A claim names the rank: a worker started in the place of one
// that died (same rank) goes on with the arrays its rank claimed, from
// their last checkpoints.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace hfta::tune {

class WorkerPool {
 public:
  WorkerPool(int rank, int size, c10::intrusive_ptr<c10d::Store> store);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Claims an array of the round whose arrays are `first` .. first +
  // count - 1 for this worker's rank, skipping those `done` says are done:
  // one nobody has claimed (the claim is the store's compare-and-set, so no
  // two ranks get one array), or one claimed by this rank without a result
  // posted (its worker died: the one in its place goes on with it).
  // nullopt when there is none.
  std::optional<int64_t> claim(int64_t first, int64_t count, const std::function<bool(int64_t)>& done);
  // An array's result (its journal entry), posted, or read if posted.
  void post(int64_t array, const std::string& entry);
  std::optional<std::string> result(int64_t array) const;
  // Rank 0's value of `key` (computed by it once), for every worker.
  int64_t fromRankZero(const std::string& key, const std::function<int64_t()>& compute);

 private:
  int rank_, size_;
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace hfta::tune
