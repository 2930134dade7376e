#pragma once
// Runs a fused optimizer and B separate torch::optim optimizers on the same
// gradients and compares them member by member (shared by the CPU and CUDA
// tests).
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/optim/optimizers.h"

namespace hfta::optim::testing {

constexpr int64_t kMembers = 4;

using MakeFused = std::function<std::unique_ptr<FusedOptimizer>(std::vector<at::Tensor>)>;
using MakeAlone = std::function<std::unique_ptr<torch::optim::Optimizer>(int64_t member, std::vector<at::Tensor>)>;
// May alter the gradients of a step (e.g. make a member's NaN).
using GradFor = std::function<at::Tensor(int step, const at::Tensor& grad)>;

// A fused optimizer with every hyper-parameter different per member, and
// the torch::optim optimizer each member would use alone.
struct OptimizerCase {
  std::string name;
  MakeFused fused;
  MakeAlone alone;
};
// SGD, Adam, AdamW, Adagrad and RMSprop (LibTorch's optimizers).
std::vector<OptimizerCase> torchOptimCases();

// Parameters of three shapes, the last large enough that the CPU loop
// splits a member's range across threads.
std::vector<at::Tensor> stackedParameters();

// Sets member-leading random gradients on `params` (seeded by `step`).
void setRandomGradients(const std::vector<at::Tensor>& params, int step);

// `steps` steps of the fused optimizer (parameters on `device`) and of B
// torch::optim optimizers (member copies on the CPU); every member whose
// reference stayed finite must match within `tolerance` (relative).
void compareWithTorchOptim(const MakeFused& make_fused, const MakeAlone& make_alone, const torch::Device& device,
                           const GradFor& grad_for = {}, int steps = 50, double tolerance = 1e-5);

}  // namespace hfta::optim::testing
