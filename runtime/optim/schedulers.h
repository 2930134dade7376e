#pragma once
// Learning-rate schedulers with per-member settings: each member's learning
// rate follows the schedule torch.optim.lr_scheduler would give it alone,
// with its own values (and, for ReduceLROnPlateau, its own metric). As in
// torch, constructing a scheduler sets the epoch-0 learning rates, and
// step() advances one epoch (or one batch, for OneCycleLR).
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace hfta::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  // Member b's learning rate set by the last step (or the constructor).
  const std::vector<double>& last_lr() const { return last_lr_; }
  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);

 protected:
  // base_lrs: the optimizer's learning rates when the schedule starts.
  explicit LRScheduler(FusedOptimizer& optimizer);
  // Call at the end of a subclass constructor: sets the epoch-0 rates.
  void start();
  // Member b's learning rate at `epoch`.
  virtual double lrAt(int64_t b, int64_t epoch) const = 0;
  // Other hyper-parameters a schedule moves (OneCycleLR's momentum).
  virtual void applyOthers(int64_t /*epoch*/) {}
  int64_t members() const { return optimizer_.array_size(); }

  FusedOptimizer& optimizer_;
  std::vector<double> base_lrs_;

 private:
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

// lr = base * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(FusedOptimizer& optimizer, PerMember step_size, PerMember gamma = 0.1);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;

 private:
  std::vector<double> step_size_, gamma_;
};

// lr = base * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(FusedOptimizer& optimizer, std::vector<int64_t> milestones, PerMember gamma = 0.1);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;
  std::vector<double> gamma_;
};

// lr = base * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(FusedOptimizer& optimizer, PerMember gamma);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;

 private:
  std::vector<double> gamma_;
};

// lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(FusedOptimizer& optimizer, PerMember t_max, PerMember eta_min = 0.0);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;

 private:
  std::vector<double> t_max_, eta_min_;
};

// lr = base * (start + (end - start) * min(epoch, total_iters) / total_iters)
class LinearLR : public LRScheduler {
 public:
  LinearLR(FusedOptimizer& optimizer, PerMember start_factor = 1.0 / 3, PerMember end_factor = 1.0,
           PerMember total_iters = 5);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;

 private:
  std::vector<double> start_, end_, total_;
};

struct OneCycleOptions {
  PerMember max_lr = 0.1;  // set it: the peak learning rate
  int64_t total_steps = 0;
  PerMember pct_start = 0.3;
  std::string anneal_strategy = "cos";  // or "linear"
  bool cycle_momentum = true;           // the optimizer's "momentum" (SGD, RMSprop) or "beta1" (Adam)
  PerMember base_momentum = 0.85;
  PerMember max_momentum = 0.95;
  PerMember div_factor = 25.0;
  PerMember final_div_factor = 1e4;
};

// The 1cycle policy (two phases): warm up from max_lr / div_factor to
// max_lr, then anneal to max_lr / div_factor / final_div_factor; momentum
// moves the other way between max_momentum and base_momentum. Its
// total_steps learning rates are those of epochs 0 .. total_steps - 1;
// epoch total_steps extrapolates the last phase (as torch does), and a
// step past it throws std::out_of_range.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(FusedOptimizer& optimizer, OneCycleOptions options);

 protected:
  double lrAt(int64_t b, int64_t epoch) const override;
  void applyOthers(int64_t epoch) override;

 private:
  // Where `step` is in member b's cycle: the phase's start and end values
  // (of lr, or momentum) and the fraction of the phase done.
  double anneal(double start, double end, double pct) const;
  double phaseValue(int64_t b, int64_t step, double initial, double peak, double last) const;

  OneCycleOptions options_;
  std::string momentum_key_;
};

struct PlateauOptions {
  std::string mode = "min";  // or "max"
  PerMember factor = 0.1;
  PerMember patience = 10;
  PerMember threshold = 1e-4;
  std::string threshold_mode = "rel";  // or "abs"
  PerMember cooldown = 0;
  PerMember min_lr = 0.0;
  double eps = 1e-8;
};

// Each member's learning rate drops by its factor when its own metric has
// not improved for `patience` epochs.
class ReduceLROnPlateau {
 public:
  ReduceLROnPlateau(FusedOptimizer& optimizer, PlateauOptions options);
  // metrics[b]: member b's metric this epoch.
  void step(const std::vector<double>& metrics);
  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);

 private:
  bool isBetter(int64_t b, double current) const;

  FusedOptimizer& optimizer_;
  PlateauOptions options_;
  std::vector<double> best_;
  std::vector<int64_t> bad_epochs_, cooldown_left_;
  int64_t last_epoch_ = 0;
};

// The state of a scheduler (LRScheduler's or ReduceLROnPlateau's) over an
// array of members picked from others of its kind: every entry is per
// member but the epoch, which they must share.
c10::IValue gatherSchedulerStates(const std::vector<MemberOfState>& picks);

}  // namespace hfta::optim
