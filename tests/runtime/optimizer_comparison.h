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
// A member whose gradients turn NaN at `step`: the caller freezes it there,
// as hfta-train does when a member's loss is no longer finite.
struct NanMember {
  int64_t member = -1;  // -1: none
  int step = 0;
};

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
// torch::optim optimizers (member copies on the CPU); every member must
// match within `tolerance` (relative): a NaN member, frozen, must still
// hold the parameters its optimizer reached before the NaN, and the
// optimizer must report it frozen.
void compareWithTorchOptim(const MakeFused& make_fused, const MakeAlone& make_alone, const torch::Device& device,
                           NanMember nan = {}, int steps = 50, double tolerance = 1e-5);

// FusedAdadelta (parameters on `device`) against torch.optim.Adadelta in
// Python, per member (LibTorch has no Adadelta): 50 steps recorded by
// tests/python/make_optim_references.py.
void compareAdadeltaWithTorchOptim(const torch::Device& device);

}  // namespace hfta::optim::testing
