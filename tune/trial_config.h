#pragma once
// What a trial's settings make of a training run, and which trials can
// train in one fused array. A setting is one of:
//   - the member's seed ("seed": its fresh weights; default the trial's number),
//   - a setting of the run as a whole (optimizer, scheduler, batch_size,
//     loss, dataset, data),
//   - an argument of the model, where --model names its file with
//     "{setting}" in it (e.g. "cnn_w{width}.pt"),
//   - a schedule setting or one of the optimizer's hyper-parameters.
// Anything else is an error naming the setting. Which trials share an array
// is not a list kept here: hfta decides by building the fused optimizer and
// schedule over their values (a setting they cannot take per member, such
// as multistep's milestones, fails there) and, for different model files,
// by fusing the models.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "run/run.h"
#include "tune/search_space.h"

namespace hfta::tune {

// `base`: the run every trial starts from (the command line's settings);
// `model_template`: its --model, "{setting}" standing for a trial's value.
// SettingError naming a setting that nothing takes or a bad value.
train::RunConfig trialConfig(const train::RunConfig& base, const std::string& model_template, const Settings& settings,
                             int64_t trial);

// The run of an array of trials (each made by trialConfig, all in one
// group): the first's run, the members' seeds and per-member settings.
train::RunConfig arrayConfig(const std::vector<train::RunConfig>& trials);

// Everything of a run but its members and their settings (the model file
// aside): trials that differ here cannot share an array.
std::string runKey(const train::RunConfig& config);

// Trials into groups that can share arrays, first fit.
class Partition {
 public:
  // The group of a trial (made by trialConfig); a new group if it fits none.
  int64_t groupOf(const train::RunConfig& trial);
  int64_t groups() const { return static_cast<int64_t>(groups_.size()); }

 private:
  bool fits(const std::vector<train::RunConfig>& group, const train::RunConfig& trial);
  bool fuses(const std::string& model_a, const std::string& model_b);

  std::vector<std::vector<train::RunConfig>> groups_;
  std::map<std::pair<std::string, std::string>, bool> fuses_;  // model files that fuse, by pair
};

}  // namespace hfta::tune
