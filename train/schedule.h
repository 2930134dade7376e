#pragma once
// The learning-rate schedule of a training run, as hfta-train names it:
// one of torch.optim.lr_scheduler's policies with per-member settings,
// stepped where that policy is stepped in a PyTorch training loop (after
// every epoch; OneCycleLR after every batch; ReduceLROnPlateau after the
// held-out evaluation, on each member's held-out loss).
#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/optim/schedulers.h"

namespace hfta::train {

class Schedule {
 public:
  // `name`: none, step, multistep, exponential, cosine, linear, onecycle or
  // plateau. `settings`: the policy's settings by name (scheduleSettings()),
  // each one value or one per member; a setting the policy does not use is
  // an error. `epochs` and `batches_per_epoch` size cosine and onecycle.
  // SettingError on a bad name or setting; nullptr for "none".
  static std::unique_ptr<Schedule> make(const std::string& name, const std::map<std::string, PerMember>& settings,
                                        optim::FusedOptimizer& optimizer, int64_t epochs, int64_t batches_per_epoch);

  void afterBatch();
  void afterEpoch(const std::vector<double>& heldout_loss);
  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);
  // The state of a schedule over members picked from others of the same
  // policy, all at the same epoch.
  static c10::IValue gatherStates(const std::vector<MemberOfState>& picks);

 private:
  std::string name_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau_;
  int64_t per_batch_steps_ = 0;  // OneCycleLR: its total steps; 0 for epoch schedules
};

struct ScheduleSetting {
  std::string name, help;
};
// Every setting some policy reads, for the command line's flags.
const std::vector<ScheduleSetting>& scheduleSettings();

}  // namespace hfta::train
