// ASHA, asynchronous successive halving (Li et al., MLSys 2020, Algorithm
// 2): a free worker takes the best trial of the highest rung that is in the
// top 1/eta of its rung's results and not yet promoted, else a new trial.
// Here `capacity` workers ask at once, each after the last one's answer.
#include <algorithm>
#include <set>

#include "tune/algorithm.h"

namespace hfta::tune {
namespace {

class Asha : public Algorithm {
 public:
  explicit Asha(const AlgorithmOptions& options)
      : options_(options),
        epochs_(ashaRungEpochs(options.min_epochs, options.max_epochs, options.eta)),
        results_(epochs_.size()),
        promoted_(epochs_.size()) {}

  std::vector<Job> next(int64_t capacity) override {
    std::vector<Job> jobs;
    while (static_cast<int64_t>(jobs.size()) < capacity) {
      auto job = promotion();
      if (!job && started_ < options_.trials) job = Job{started_++, 0, 0, 0, epochs_[0]};
      if (!job) break;
      jobs.push_back(*job);
    }
    if (jobs.empty()) finish();
    return jobs;
  }

  void report(const Job& job, double metric) override { results_[job.rung].emplace_back(metric, job.trial); }
  std::vector<Decision> decisions() const override { return decisions_; }
  int64_t trials() const override { return started_; }

 private:
  std::optional<Job> promotion() {
    for (auto k = static_cast<int64_t>(epochs_.size()) - 2; k >= 0; --k) {
      auto ranked = results_[k];
      std::sort(ranked.begin(), ranked.end(),
                [](const auto& a, const auto& b) { return rankedBefore(a.first, a.second, b.first, b.second); });
      const auto top = ranked.size() / static_cast<size_t>(options_.eta);
      for (size_t i = 0; i < top; ++i) {
        const auto [metric, trial] = ranked[i];
        if (promoted_[k].insert(trial).second) {
          decisions_.push_back({trial, 0, k, metric, true});
          return Job{trial, 0, k + 1, epochs_[k], epochs_[k + 1]};
        }
      }
    }
    return std::nullopt;
  }

  // The search is over: every trial stopped where it last reported.
  void finish() {
    if (finished_) return;
    finished_ = true;
    for (size_t k = 0; k + 1 < epochs_.size(); ++k) {
      for (const auto& [metric, trial] : results_[k]) {
        if (!promoted_[k].count(trial)) decisions_.push_back({trial, 0, static_cast<int64_t>(k), metric, false});
      }
    }
  }

  AlgorithmOptions options_;
  std::vector<int64_t> epochs_;
  std::vector<std::vector<std::pair<double, int64_t>>> results_;  // per rung: (metric, trial)
  std::vector<std::set<int64_t>> promoted_;                       // per rung: trials promoted from it
  std::vector<Decision> decisions_;
  int64_t started_ = 0;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<Algorithm> makeAsha(const AlgorithmOptions& options) { return std::make_unique<Asha>(options); }

}  // namespace hfta::tune
