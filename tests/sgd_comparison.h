#pragma once
// Runs FusedSGD and B separate torch::optim::SGD optimizers on the same
// gradients and compares them member by member (shared by the CPU and CUDA
// tests).
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace hfta::optim::testing {

constexpr int64_t kMembers = 4;

struct Case {
  std::vector<double> lr, momentum, dampening, weight_decay;
  std::vector<bool> nesterov;
};

// Every hyper-parameter different per member.
Case perMemberCase();

// 20 steps on stacked params (on `device`) with FusedSGD and on per-member
// copies with torch::optim::SGD; `grad_for(step, grad)` may alter the
// gradients. Members whose reference diverged are left to the caller.
void compareWithTorchOptim(const Case& c, const torch::Device& device,
                           const std::function<at::Tensor(int, const at::Tensor&)>& grad_for = {});

}  // namespace hfta::optim::testing
