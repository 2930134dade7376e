#pragma once
// A training run as hfta-train makes it: the fused array (loaded, made of
// fresh members of a plain model, or restored from a checkpoint), the data
// with its held-out split, the fused optimizer and schedule, and the
// metrics so far. A front end drives it epoch by epoch.
//
//   hfta::train::Run run(config);
//   while (!run.finished()) run.nextEpoch();
//   auto ranked = hfta::train::rankMembers(run.rows(), run.arraySize(), RankBy::HeldOutAccuracy);
#include <torch/script.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run/gather.h"
#include "runtime/optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace hfta::train {

struct RunConfig {
  // A module written by hfta-fuse, or a plain model: then `array_size`
  // fresh members of it, re-initialized from `seeds` (default 0, 1, ...).
  std::string model;
  int64_t array_size = 0;
  std::vector<uint64_t> seeds;
  // A checkpoint folder to go on from; `model`, when given, must be the
  // model it was saved from.
  std::string resume;
  // Or members of checkpoints (of one model, trained the same way, after the
  // same epoch) to go on from as one array: each as its checkpoint left it.
  std::vector<MemberSource> members;
  std::string dataset = "digits", data;
  int64_t limit = 0;             // the data set's first samples only (0: all)
  int64_t sequence_length = 35;  // tokens per sequence, for text data
  double holdout = 0.2;
  // HFTA's --eval: after training, each member's top-1 and top-5 accuracy on
  // the data set's test split (CIFAR-10's test_batch.bin, MNIST's t10k
  // files), or on the held-out samples where the folder has none.
  bool eval = false;
  std::string optimizer = "sgd";
  optim::Hyper hyper;  // the optimizer's settings by name, one value or one per member
  std::string scheduler = "none";
  std::map<std::string, PerMember> schedule_settings;
  TrainOptions options;
};

// "float32" or "float64" (the names torch gives them); SettingError("dtype").
at::ScalarType dtypeByName(const std::string& name);
// --amp-dtype: "bfloat16" or "float16"; SettingError("amp_dtype").
at::ScalarType ampDtypeByName(const std::string& name);
// --amp and --amp-dtype: the autocast dtype (none without --amp; by
// default bfloat16 on the CPU, float16 on CUDA); SettingError("amp_dtype").
std::optional<at::ScalarType> ampSetting(bool amp, const std::string& amp_dtype, c10::Device device);
// "cpu", "cuda" or "cuda:N"; SettingError("device") if it is not there.
c10::Device deviceByName(const std::string& name);

class Run {
 public:
  // UserError (SettingError for a bad setting) if anything of it is wrong.
  explicit Run(const RunConfig& config);

  int64_t arraySize() const { return trainer_->arraySize(); }
  const Dataset& trainData() const { return train_; }
  const Dataset& heldOutData() const { return heldout_; }
  // What --eval evaluates on (the test split, or the held-out samples).
  const Dataset& evalData() const { return test_ ? *test_ : heldout_; }
  // How a resumed run found its checkpoint, when that needs saying.
  const std::string& resumeNote() const { return resume_note_; }
  const Progress& progress() const { return trainer_->progress(); }
  const std::vector<MemberEpoch>& rows() const { return rows_; }
  // Data parallel: seconds spent in sums and broadcasts across ranks so far.
  double communicationSeconds() const { return trainer_->communicationSeconds(); }
  bool finished() const { return progress().epochs_done >= config_.options.epochs; }

  // (The rest of) the next epoch: its B rows, also appended to rows(); none
  // if `between` stopped it (progress() says where).
  std::vector<MemberEpoch> nextEpoch(const Trainer::BetweenBatches& between = {});
  void saveCheckpoint(const std::string& dir) const;
  // --eval: each member on evalData(), in eval mode.
  std::vector<MemberEvaluation> evaluate() { return trainer_->evaluateTopK(evalData()); }
  // The given members as plain modules, DIR/member_<b>.pt, all or none;
  // returns the paths in the order given.
  std::vector<std::string> exportMembers(const std::vector<int64_t>& members, const std::string& dir) const;

 private:
  RunConfig config_;
  std::string resume_note_;
  Dataset train_, heldout_;
  std::optional<Dataset> test_;
  std::unique_ptr<optim::FusedOptimizer> optimizer_;
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<Trainer> trainer_;
  std::vector<MemberEpoch> rows_;
};

}  // namespace hfta::train
