#pragma once
// hfta-tune's engine: draws trials from a search space, runs the jobs a
// search algorithm hands out in fused arrays (trials of one group, at the
// same epoch; at most the planned array size each), and records everything
// in the output folder. A rung that stops trials leaves the survivors to go
// on in smaller arrays, gathered from the arrays they trained in (their
// parameters, optimizer and schedule state carried over exactly;
// train/checkpoint.h, gatherCheckpoints); survivors of several arrays merge.
//
// OUT/journal.jsonl records each finished array; a tuning run started again
// on the same folder (--resume) replays the search and takes those arrays'
// results from it instead of training them again. An array checkpoints
// after every epoch (and when stopped): an array cut short goes on from
// there.
//
// Over several workers (TuneOptions::pool, tune/worker_pool.h) every worker
// runs this same search and the arrays of each round are shared out among
// them; rank 0 writes the outputs.
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run/run.h"
#include "train/metrics.h"
#include "tune/algorithm.h"
#include "tune/array_planner.h"
#include "tune/search_space.h"
#include "tune/trial_config.h"
#include "tune/worker_pool.h"

namespace hfta::tune {

struct TuneOptions {
  std::string space;  // the search space's file
  SearchSpace parsed_space;
  std::string model;     // --model, "{setting}" for a trial's value
  train::RunConfig run;  // every trial's run before its settings
  AlgorithmOptions algorithm;
  int64_t max_array_size = 16;
  int64_t array_size = 0;  // a fixed array size (0: planned by measurement)
  std::string plan_cache;
  uint64_t seed = 0;  // the search space's draws
  train::RankBy rank_by = train::RankBy::HeldOutLoss;
  std::string out;
  // Keep every array's checkpoint (default: only those a trial that may
  // train on, or the best of the others, still needs).
  bool keep_checkpoints = false;
  // The workers this process is one of, or none (one process). Not owned.
  WorkerPool* pool = nullptr;
};

struct TrialRecord {
  int64_t id = 0;
  Settings settings;
  train::RunConfig config;
  int64_t group = 0;
  std::vector<train::MemberEpoch> rows;  // member = the trial's number
  train::MemberSource latest;            // where its state is, after `epochs`
  int64_t epochs = 0;
  std::string status = "pending";  // running, stopped (rung k), finished
};

struct ArrayRecord {
  int64_t id = 0, group = 0, bracket = 0, rung = 0, from_epochs = 0, to_epochs = 0;
  std::vector<int64_t> trials;
  double seconds = 0;
  bool replayed = false;  // its results came from the journal
  int worker = 0;         // the rank that trained it
};

class Tuner {
 public:
  // SettingError / UserError for bad options (before anything trains).
  explicit Tuner(TuneOptions options);

  // What happens, for a terminal: each array as it starts and ends.
  using Log = std::function<void(const std::string&)>;
  // Runs the search to its end; `stop` is asked between batches (and while
  // waiting for other workers) and makes run() return false (the array in
  // flight checkpointed, to go on from there on --resume).
  bool run(const Log& log, const std::function<bool()>& stop);

  const std::map<int64_t, TrialRecord>& trials() const { return trials_; }
  const std::vector<ArrayRecord>& arrays() const { return arrays_; }
  const std::vector<Decision>& decisions() const { return decisions_; }
  // Trials best first by their last epoch's metric (diverged ones last).
  std::vector<const TrialRecord*> ranked() const;
  // Planned array size per group.
  const std::map<int64_t, ArrayPlan>& plans() const { return plans_; }
  // The metric the search minimizes, of a row (NaN for a diverged trial).
  double metric(const train::MemberEpoch& row) const;
  train::RankBy rankBy() const { return options_.rank_by; }

 private:
  TrialRecord& trial(int64_t id);
  int64_t arraySizeOf(int64_t group);
  // Trains a round's arrays (this worker's share of them) or takes their
  // results from the journal or from the workers that trained them; false
  // if `stop` stopped it.
  bool runRound(std::vector<ArrayRecord>& round, const Log& log, const std::function<bool()>& stop);
  // Trains one array (from its checkpoint, if it has one from an earlier
  // attempt) and returns its journal entry; none if `stop` stopped it.
  std::optional<nlohmann::json> trainArray(const ArrayRecord& array, const Log& log, const std::function<bool()>& stop);
  // Takes an array's results (its journal entry) into the trials' records.
  void apply(ArrayRecord& array, const nlohmann::json& entry, const Log& log);
  // The rank that reports and writes: rank 0, or the only process.
  bool lead() const { return options_.pool == nullptr || options_.pool->rank() == 0; }
  // The algorithm's verdicts so far, and the trials' status by them.
  void takeDecisions();
  // Removes the array checkpoints nothing needs: a trial that may still
  // train needs its latest; of the trials done (stopped or finished) only
  // the best can still turn out the best of all (the others each rank
  // below a trial whose metric no longer changes), for best.pt.
  void removeUnneededCheckpoints() const;
  void writeOutputs() const;

  TuneOptions options_;
  std::unique_ptr<Algorithm> algorithm_;
  Partition partition_;
  std::map<int64_t, TrialRecord> trials_;
  std::vector<ArrayRecord> arrays_;
  std::vector<Decision> decisions_;
  std::map<int64_t, ArrayPlan> plans_;
  std::map<int64_t, nlohmann::json> journal_;  // what an earlier run finished, by array: --resume replays it
};

}  // namespace hfta::tune
