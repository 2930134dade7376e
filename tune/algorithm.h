#pragma once
// The search algorithms as the tuner drives them: each hands out jobs
// (train trial t from epoch a to epoch b, as a rung of its schedule asks),
// hears each job's held-out metric, and decides which trials go on. The
// tuner runs the jobs it is handed in fused arrays; an algorithm knows
// nothing of arrays.
//
//   auto algorithm = makeAlgorithm({"hyperband", .max_epochs = 27, .eta = 3});
//   for (auto jobs = algorithm->next(8); !jobs.empty(); jobs = algorithm->next(8))
//     for (auto& job : jobs) algorithm->report(job, train(job));
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hfta::tune {

struct Job {
  int64_t trial = 0;
  int64_t bracket = 0;      // Hyperband's s (0 for random search and ASHA)
  int64_t rung = 0;         // 0 for a new trial
  int64_t from_epochs = 0;  // the epochs the trial has trained (its checkpoint's), 0 for a new trial
  int64_t to_epochs = 0;    // the epochs it has trained when the job ends
};

// A rung's verdict on a trial, once it is known.
struct Decision {
  int64_t trial = 0, bracket = 0, rung = 0;
  double metric = 0;  // lower is better
  bool promoted = false;
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  // Up to `capacity` jobs that can run now (Hyperband: a whole rung, however
  // many; the others as many as that many free workers would take); empty
  // when the search is over. Call it once every job it handed out before
  // has been reported.
  virtual std::vector<Job> next(int64_t capacity) = 0;
  // A job's result: the trial's held-out metric at to_epochs, lower better.
  virtual void report(const Job& job, double metric) = 0;
  // The verdicts made so far (and, once the search is over, on every trial
  // left where it stopped).
  virtual std::vector<Decision> decisions() const = 0;
  // Trials started so far.
  virtual int64_t trials() const = 0;
};

struct AlgorithmOptions {
  std::string name;        // random, hyperband or asha
  int64_t max_epochs = 0;  // R
  int64_t eta = 3;
  // random and asha: how many trials to start; hyperband: whole iterations
  // (every bracket) until at least this many have started (0: one iteration).
  int64_t trials = 0;
  int64_t min_epochs = 1;  // asha: the first rung's epochs (r)
};

// SettingError naming the option for a bad name or an R or eta out of range.
std::unique_ptr<Algorithm> makeAlgorithm(const AlgorithmOptions& options);
// The same, by kind, the options already checked.
std::unique_ptr<Algorithm> makeRandomSearch(const AlgorithmOptions& options);
std::unique_ptr<Algorithm> makeHyperband(const AlgorithmOptions& options);
std::unique_ptr<Algorithm> makeAsha(const AlgorithmOptions& options);

// The order in which a rung ranks its trials: by metric, a NaN (a diverged
// trial) last, ties by trial number.
bool rankedBefore(double metric_a, int64_t trial_a, double metric_b, int64_t trial_b);

// Hyperband's schedule (Li et al., JMLR 2018, Algorithm 1) in epochs, with
// r_min = 1 epoch: s_max = floor(log_eta R); bracket s starts
// n = ceil((s_max + 1) eta^s / (s + 1)) trials; its rung i keeps
// n_i = floor(n eta^-i) of them, each trained to r_i = R eta^(i - s) epochs
// in all (rounded to the nearest epoch where R is not a power of eta).
struct Rung {
  int64_t trials = 0, epochs = 0;
};
struct Bracket {
  int64_t s = 0;
  std::vector<Rung> rungs;
};
std::vector<Bracket> hyperbandBrackets(int64_t max_epochs, int64_t eta);

// ASHA's rungs (Li et al., MLSys 2020, Algorithm 2, with s = 0): epochs
// r eta^k for k = 0, 1, ... while below R, then R.
std::vector<int64_t> ashaRungEpochs(int64_t min_epochs, int64_t max_epochs, int64_t eta);

}  // namespace hfta::tune
