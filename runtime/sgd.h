#pragma once
// Fused SGD over stacked parameters ([B, ...]) with per-member
// hyper-parameters. Member b follows exactly the update torch.optim.SGD
// would apply to it alone; nothing mixes across members, so a member whose
// gradient is NaN leaves the others untouched.
#include <ATen/ATen.h>

#include <vector>

#include "runtime/per_member.h"

namespace hfta::optim {

struct SGDOptions {
  PerMember lr = 0.01;
  PerMember momentum = 0.0;
  PerMember dampening = 0.0;
  PerMember weight_decay = 0.0;
  PerMember nesterov = 0.0;  // 0 or 1 per member
};

class FusedSGD {
 public:
  // Every parameter must be stacked with `array_size` members on dim 0.
  FusedSGD(std::vector<at::Tensor> params, int64_t array_size, SGDOptions options);

  void step();
  void zero_grad();
  int64_t array_size() const { return array_size_; }
  const SGDOptions& options() const { return options_; }
  // Per-member learning rates, e.g. for a scheduler.
  void set_lr(PerMember lr);

 private:
  void stepCpuOrComposite(size_t i);

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> momentum_buffers_;  // undefined until first step
  int64_t array_size_;
  SGDOptions options_;
  bool any_momentum_ = false;
};

#ifdef HFTA_WITH_CUDA
namespace cuda {
// One launch per parameter: member b's hyper-parameters come from
// `hyper` = [lr, momentum, dampening, weight_decay, nesterov] x B (device).
void sgdStep(at::Tensor& param, const at::Tensor& grad, at::Tensor& momentum_buffer,
             const at::Tensor& hyper, bool first_step);
}  // namespace cuda
#endif

}  // namespace hfta::optim
