// Hyperband (Li et al., JMLR 2018): brackets of successive halving, each
// rung run whole before the next (synchronous, as Algorithm 1). The
// brackets of an iteration are independent, so they run side by side: each
// round hands out the next rung of every bracket still going (more arrays
// in flight for workers to share; the trials, their verdicts and their
// numbering are Algorithm 1's). A trial promoted to the next rung goes on
// from the epochs it has trained, not from scratch.
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
    std::vector<Job> jobs;
    for (size_t b = 0; b < going_.size(); ++b) {
      auto& bracket = going_[b];
      const auto& rungs = brackets_[b].rungs;
      if (bracket.done) continue;
      if (bracket.rung + 1 == static_cast<int64_t>(rungs.size())) {
        bracket.done = true;
        continue;
      }
      // Keep the rung's best n_{i+1}; the rest stop here.
      std::vector<std::pair<double, int64_t>> ranked;
      for (const auto& [trial, metric] : bracket.results) ranked.emplace_back(metric, trial);
      std::sort(ranked.begin(), ranked.end(),
                [](const auto& a, const auto& b) { return rankedBefore(a.first, a.second, b.first, b.second); });
      const auto keep = static_cast<size_t>(rungs[bracket.rung + 1].trials);
      std::vector<Job> promoted;
      for (size_t k = 0; k < ranked.size(); ++k) {
        const auto [metric, trial] = ranked[k];
        decisions_.push_back({trial, brackets_[b].s, bracket.rung, metric, k < keep});
        if (k < keep) {
          promoted.push_back(
              {trial, brackets_[b].s, bracket.rung + 1, rungs[bracket.rung].epochs, rungs[bracket.rung + 1].epochs});
        }
      }
      std::sort(promoted.begin(), promoted.end(), [](const Job& x, const Job& y) { return x.trial < y.trial; });
      jobs.insert(jobs.end(), promoted.begin(), promoted.end());
      ++bracket.rung;
      bracket.results.clear();
    }
    if (jobs.empty()) return startIteration();
    return jobs;
  }

  void report(const Job& job, double metric) override {
    for (size_t b = 0; b < brackets_.size(); ++b) {
      if (brackets_[b].s == job.bracket) going_[b].results[job.trial] = metric;
    }
  }
  std::vector<Decision> decisions() const override { return decisions_; }
  int64_t trials() const override { return started_; }

 private:
  // Every bracket's first rung: its n new trials, numbered bracket by
  // bracket (a new iteration while fewer than --trials have started).
  std::vector<Job> startIteration() {
    if (iterations_ > 0 && started_ >= options_.trials) return {};
    ++iterations_;
    going_.assign(brackets_.size(), {});
    std::vector<Job> jobs;
    for (const auto& bracket : brackets_) {
      const auto& first = bracket.rungs[0];
      for (int64_t k = 0; k < first.trials; ++k) jobs.push_back({started_++, bracket.s, 0, 0, first.epochs});
    }
    return jobs;
  }

  struct Going {
    int64_t rung = 0;
    std::map<int64_t, double> results;  // the current rung's, by trial
    bool done = false;
  };

  AlgorithmOptions options_;
  std::vector<Bracket> brackets_;
  std::vector<Going> going_;  // per bracket of the current iteration
  int64_t started_ = 0, iterations_ = 0;
  std::vector<Decision> decisions_;
};

}  // namespace

std::unique_ptr<Algorithm> makeHyperband(const AlgorithmOptions& options) {
  return std::make_unique<Hyperband>(options);
}

}  // namespace hfta::tune
