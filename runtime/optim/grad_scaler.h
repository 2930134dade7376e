#pragma once
// Loss scaling for float16 training with one scale per member: PyTorch's
// torch.amp.GradScaler rule applied to each member alone. HFTA scales the
// sum of all members' losses with one GradScaler, so one member's overflow
// skips every member's step and backs off every member's scale; here it
// costs that member's step and scale only.
//
//   hfta::optim::FusedGradScaler scaler(B);
//   scaler.scale(losses).sum().backward();  // losses [B], one per member
//   scaler.unscale_(optimizer);             // optional: before per-member clipping
//   scaler.step(optimizer);                 // skips the members that overflowed
//   scaler.update();
#include <ATen/ATen.h>

#include <vector>

#include "runtime/optim/optimizer.h"
#include "runtime/optim/per_member.h"

namespace hfta::optim {

// torch.amp.GradScaler's settings (and defaults), one value or one per member.
struct GradScalerOptions {
  PerMember init_scale = 65536.0;  // 2^16
  PerMember growth_factor = 2.0;
  PerMember backoff_factor = 0.5;
  PerMember growth_interval = 2000;
};

class FusedGradScaler {
 public:
  // std::invalid_argument naming the member if a setting is out of range.
  explicit FusedGradScaler(int64_t array_size, GradScalerOptions options = {});

  // losses [B, ...] times member b's scale, in the losses' dtype and device.
  at::Tensor scale(const at::Tensor& losses) const;
  // Divides member b's gradients (all of the optimizer's parameters) by its
  // scale, in one pass over them (one CUDA launch per gradient dtype; a
  // vectorized loop on the CPU), and notes the members with a gradient that
  // is not finite. At most once per step, before step(); call it yourself
  // to clip the unscaled gradients.
  void unscale_(FusedOptimizer& optimizer);
  // The same over several optimizers stepped together (one per parameter
  // group of hfta.optim's), with one inf check across them all.
  void unscale_(const std::vector<FusedOptimizer*>& optimizers);
  // The optimizer's step for the members whose gradients were all finite
  // (unscaling first if unscale_ was not called); returns the members'
  // skip flags.
  std::vector<uint8_t> step(FusedOptimizer& optimizer);
  std::vector<uint8_t> step(const std::vector<FusedOptimizer*>& optimizers);
  // Each member's scale, as GradScaler.update() moves one: times
  // backoff_factor after a step that found a non-finite gradient (and the
  // count of finite steps starts again), times growth_factor after
  // growth_interval finite steps in a row.
  void update();

  int64_t array_size() const { return array_size_; }
  // The members' scales (float32 values, as torch keeps them).
  std::vector<double> scales() const;
  // Per member: did this step's gradients have an inf or NaN (after unscale_).
  const std::vector<uint8_t>& found_inf() const { return found_inf_; }

  // {"scale": [B], "growth_tracker": [B], "growth_factor": [B],
  // "backoff_factor": [B], "growth_interval": [B]}.
  c10::IValue state_dict() const;
  // std::invalid_argument if it is not a scaler state of B members.
  void load_state_dict(const c10::IValue& state);
  // The state of an array of picked members of other scalers: every entry
  // is per member.
  static c10::IValue gather_state_dicts(const std::vector<MemberOfState>& picks) { return gatherListDict(picks); }

 private:
  enum class Stage { Ready, Unscaled, Stepped };

  int64_t array_size_;
  std::vector<double> growth_factor_, backoff_factor_;
  std::vector<int64_t> growth_interval_;
  at::Tensor scale_;           // [B] float32, on the CPU
  at::Tensor growth_tracker_;  // [B] int32: finite steps in a row
  std::vector<uint8_t> found_inf_;
  Stage stage_ = Stage::Ready;
};

}  // namespace hfta::optim
