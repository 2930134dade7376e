#pragma once
// What the fused optimizers share: B members' parameters stacked on dim 0,
// hyper-parameters that are one value for all members or one per member,
// per-parameter state stacked like the parameter, and a state dict that
// saves and restores all of it. Member b's update is exactly the one its own
// optimizer would make alone; nothing mixes across members, so a member
// whose gradient is NaN leaves the others untouched.
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/optim/cpu_loop.h"
#include "runtime/optim/member_state.h"
#include "runtime/optim/multi_tensor.h"
#include "runtime/optim/per_member.h"

namespace hfta::optim {

// Hyper-parameters by name (booleans such as nesterov are 0 or 1).
using Hyper = std::map<std::string, PerMember>;

class FusedOptimizer {
 public:
  virtual ~FusedOptimizer() = default;
  FusedOptimizer(const FusedOptimizer&) = delete;
  FusedOptimizer& operator=(const FusedOptimizer&) = delete;

  // Updates every parameter that has a gradient, for every member except
  // the frozen ones and those marked in `skip` (B flags, or none): their
  // parameters, state and step counts stay as they are, as if their own
  // optimizer had not stepped (what a per-member loss scaler asks after an
  // overflow).
  void step(const std::vector<uint8_t>& skip = {});
  void zero_grad();

  const std::string& name() const { return name_; }
  int64_t array_size() const { return array_size_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  const Hyper& hyper() const { return hyper_; }
  const PerMember& hyper(const std::string& key) const;
  // One value or B values; std::invalid_argument otherwise.
  void set_hyper(const std::string& key, PerMember value);
  // Stops member b's updates for good (its parameters and state stay as
  // they are): what a trainer does to a member whose loss diverged.
  void freeze(int64_t member);
  bool frozen(int64_t member) const { return frozen_.at(member) != 0; }
  const PerMember& lr() const { return hyper("lr"); }
  void set_lr(PerMember lr) { set_hyper("lr", std::move(lr)); }
  // A value a scheduler computed: as in torch.optim, not held to the range
  // a user's value must be in (OneCycleLR's "linear" extrapolation one step
  // past its cycle goes below zero). Only its count is checked.
  void set_scheduled_hyper(const std::string& key, PerMember value);

  // {"optimizer", "array_size", "hyper": {key: [B values]}, "steps": [per
  // parameter [B]], "state": [per parameter {key: tensor}], "frozen": [B]}
  // (a state saved with one count per parameter loads too).
  c10::IValue state_dict() const;
  // std::invalid_argument if it is another optimizer's, or its parameters'
  // count or shapes differ.
  void load_state_dict(const c10::IValue& state);
  // The state dict of an array of the picked members of other arrays'
  // optimizers of this kind (the same parameters): member b is member
  // picks[b].member of picks[b].state, its hyper-parameters, step counts,
  // state and frozen flag as they were. A state tensor one member has and
  // another lacks (created when some member first needed it) is zero for
  // the latter, which never read it. std::invalid_argument if the states
  // are of different optimizers or parameters.
  static c10::IValue gather_state_dicts(const std::vector<MemberOfState>& picks);
  // Written through a temporary file and a rename.
  void save(const std::string& path) const;
  void load(const std::string& path);

 protected:
  // `check` validates the hyper-parameters (throws std::invalid_argument).
  FusedOptimizer(std::string name, std::vector<at::Tensor> params, int64_t array_size, Hyper hyper);

  // Updates the parameters at `indices` (those with a gradient), under
  // NoGradGuard, for the members not idle() in this step; their step
  // counts are already incremented.
  virtual void updateParameters(const std::vector<size_t>& indices) = 0;

  // Runs Rule over the parameters at `indices`: on the CPU one pass per
  // parameter, on CUDA one multi-tensor launch for all. states_of(i) gives
  // parameter i's state tensors by slot (nullptr where unused);
  // scalars_of(i) member b's scalars at [b].
  template <typename Rule>
  void applyRule(const std::vector<size_t>& indices,
                 const std::function<std::array<at::Tensor*, rules::kMaxStates>(size_t)>& states_of,
                 const std::function<std::vector<typename Rule::Scalars>(size_t)>& scalars_of);
  // Updates member b's parameter i has taken so far (1 during its first).
  int64_t stepsOf(size_t i, int64_t member) const { return steps_[i][member]; }
  // The subclass's checks of a candidate set of hyper-parameters (each
  // already one or B values), run on construction and on every change;
  // throw std::invalid_argument naming the member.
  virtual void check(const Hyper& hyper) const = 0;

  // State `key` of parameter i, created by `init` on first use.
  at::Tensor& state(size_t i, const std::string& key, const std::function<at::Tensor()>& init);
  bool hasState(size_t i, const std::string& key) const { return state_[i].count(key) > 0; }
  // The B values of a hyper-parameter.
  std::vector<double> values(const std::string& key) const;
  bool anyNonZero(const std::string& key) const;
  // Call at the end of a subclass constructor (virtual check is not
  // available in the base constructor).
  void checkAll() const;

 private:
  std::string name_;
  std::vector<at::Tensor> params_;
  int64_t array_size_;
  Hyper hyper_;
  std::vector<std::vector<int64_t>> steps_;  // [parameter][member]
  std::vector<std::map<std::string, at::Tensor>> state_;
  std::vector<uint8_t> frozen_;  // per member
  std::vector<uint8_t> idle_;    // per member, in the step in flight: frozen or skipped
};

template <typename Rule>
void FusedOptimizer::applyRule(const std::vector<size_t>& indices,
                               const std::function<std::array<at::Tensor*, rules::kMaxStates>(size_t)>& states_of,
                               const std::function<std::vector<typename Rule::Scalars>(size_t)>& scalars_of) {
  if (indices.empty()) return;
  if (!params_[indices[0]].is_cuda()) {
    for (size_t i : indices) {
      cpu::update<Rule>(params_[i], params_[i].grad().contiguous(), states_of(i), scalars_of(i), idle_);
    }
    return;
  }
  cuda::TensorGroup group;
  std::vector<typename Rule::Scalars> scalars;
  for (size_t i : indices) {
    group.params.push_back(params_[i]);
    group.grads.push_back(params_[i].grad().contiguous());
    std::array<at::Tensor, rules::kMaxStates> states;
    const auto slots = states_of(i);
    for (int j = 0; j < rules::kMaxStates; ++j) {
      if (slots[j] != nullptr) states[j] = *slots[j];
    }
    group.states.push_back(states);
    const auto member_scalars = scalars_of(i);
    scalars.insert(scalars.end(), member_scalars.begin(), member_scalars.end());
  }
  cuda::multiTensorApply<Rule>(group, scalars, array_size_, idle_);
}

// Throws std::invalid_argument unless lo <= hyper[key] of every member (<=
// or < hi, as `hi_open` says).
void checkRange(const Hyper& hyper, const std::string& key, int64_t array_size, double lo, double hi,
                bool hi_open = false);

}  // namespace hfta::optim
