// Hyperband (Li et al., JMLR 2018): brackets of successive halving, most
// aggressive first, each rung run whole before the next (synchronous, as
// Algorithm 1). A trial promoted to the next rung goes on from the epochs
// it has trained, not from scratch.
#include <algorithm>
#include <map>

#include "tune/algorithm.h"

namespace hfta::tune {
namespace {

class Hyperband : public Algorithm {
 public:
  explicit Hyperband(const AlgorithmOptions& options)
      : options_(options), brackets_(hyperbandBrackets(options.max_epochs, options.eta)) {}

  std::vector<Job> next(int64_t /*capacity: a rung runs whole*/) override {
    if (rung_ < 0) return startBracket();
    const auto& rungs = brackets_[bracket_].rungs;
    if (rung_ + 1 == static_cast<int64_t>(rungs.size())) {
      ++bracket_;
      return startBracket();
    }
    // Keep the rung's best n_{i+1}; the rest stop here.
    std::vector<std::pair<double, int64_t>> ranked;
    for (const auto& [trial, metric] : results_) ranked.emplace_back(metric, trial);
    std::sort(ranked.begin(), ranked.end(),
              [](const auto& a, const auto& b) { return rankedBefore(a.first, a.second, b.first, b.second); });
    const auto keep = static_cast<size_t>(rungs[rung_ + 1].trials);
    std::vector<Job> jobs;
    for (size_t k = 0; k < ranked.size(); ++k) {
      const auto [metric, trial] = ranked[k];
      decisions_.push_back({trial, s(), rung_, metric, k < keep});
      if (k < keep) jobs.push_back({trial, s(), rung_ + 1, rungs[rung_].epochs, rungs[rung_ + 1].epochs});
    }
    std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.trial < b.trial; });
    ++rung_;
    results_.clear();
    return jobs;
  }

  void report(const Job& job, double metric) override { results_[job.trial] = metric; }
  std::vector<Decision> decisions() const override { return decisions_; }
  int64_t trials() const override { return started_; }

 private:
  int64_t s() const { return brackets_[bracket_].s; }

  // The next bracket's first rung: n new trials (a new iteration of every
  // bracket while fewer than --trials have started).
  std::vector<Job> startBracket() {
    if (bracket_ == static_cast<int64_t>(brackets_.size())) {
      if (started_ >= options_.trials) return {};
      bracket_ = 0;
    }
    rung_ = 0;
    results_.clear();
    const auto& first = brackets_[bracket_].rungs[0];
    std::vector<Job> jobs;
    for (int64_t k = 0; k < first.trials; ++k) jobs.push_back({started_++, s(), 0, 0, first.epochs});
    return jobs;
  }

  AlgorithmOptions options_;
  std::vector<Bracket> brackets_;
  int64_t bracket_ = 0, rung_ = -1, started_ = 0;
  std::map<int64_t, double> results_;  // the current rung's, by trial
  std::vector<Decision> decisions_;
};

}  // namespace

std::unique_ptr<Algorithm> makeHyperband(const AlgorithmOptions& options) {
  return std::make_unique<Hyperband>(options);
}

}  // namespace hfta::tune
