// FusedSGD against B separate torch::optim::SGD optimizers on the same
// gradients, with every hyper-parameter different per member.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/sgd.h"
#include "tests/test_support.h"

namespace hfta::optim {
namespace {

using testing::allClose;

constexpr int64_t kMembers = 4;
constexpr int kSteps = 20;

struct Case {
  std::vector<double> lr, momentum, dampening, weight_decay;
  std::vector<bool> nesterov;
};

Case perMemberCase() {
  return {{0.1, 0.05, 0.01, 0.2}, {0.0, 0.9, 0.5, 0.9}, {0.0, 0.0, 0.3, 0.0},
          {0.0, 1e-2, 0.0, 1e-3}, {false, true, false, false}};
}

// Runs kSteps on stacked params with FusedSGD and on per-member copies with
// torch::optim::SGD; gradients come from `grad_for(step)`.
void compareWithTorchOptim(const Case& c, const torch::Device& device,
                           const std::function<at::Tensor(int, const at::Tensor&)>& grad_for = {}) {
  torch::manual_seed(3);
  std::vector<at::Tensor> stacked{torch::randn({kMembers, 7, 5}), torch::randn({kMembers, 5})};
  std::vector<std::vector<at::Tensor>> alone(kMembers);
  std::vector<std::unique_ptr<torch::optim::SGD>> torch_optims;
  for (int64_t b = 0; b < kMembers; ++b) {
    for (const auto& p : stacked) alone[b].push_back(p[b].clone().requires_grad_(true));
    torch_optims.push_back(std::make_unique<torch::optim::SGD>(
        alone[b], torch::optim::SGDOptions(c.lr[b])
                      .momentum(c.momentum[b])
                      .dampening(c.dampening[b])
                      .weight_decay(c.weight_decay[b])
                      .nesterov(c.nesterov[b])));
  }
  for (auto& p : stacked) p = p.to(device).requires_grad_(true);
  std::vector<double> nesterov(c.nesterov.begin(), c.nesterov.end());
  FusedSGD fused(stacked, kMembers, {c.lr, c.momentum, c.dampening, c.weight_decay, nesterov});
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < stacked.size(); ++i) {
      auto grad = torch::randn(stacked[i].sizes());
      if (grad_for) grad = grad_for(step, grad);
      stacked[i].mutable_grad() = grad.to(device);
      for (int64_t b = 0; b < kMembers; ++b) alone[b][i].mutable_grad() = grad[b].clone();
    }
    fused.step();
    for (auto& o : torch_optims) o->step();
  }
  for (size_t i = 0; i < stacked.size(); ++i) {
    for (int64_t b = 0; b < kMembers; ++b) {
      if (!alone[b][i].isfinite().all().item<bool>()) continue;  // compared by the caller
      EXPECT_TRUE(allClose(stacked[i][b].cpu(), alone[b][i], 1e-6)) << "param " << i << " member " << b;
    }
  }
}

TEST(FusedSGD, MatchesSeparateTorchOptimizersWithPerMemberHyperParameters) {
  compareWithTorchOptim(perMemberCase(), torch::kCPU);
}

TEST(FusedSGD, ScalarHyperParametersApplyToEveryMember) {
  Case expanded{std::vector<double>(kMembers, 0.03), std::vector<double>(kMembers, 0.9),
                std::vector<double>(kMembers, 0.1), std::vector<double>(kMembers, 1e-4),
                std::vector<bool>(kMembers, false)};
  compareWithTorchOptim(expanded, torch::kCPU);
  // The scalar form must give exactly what the expanded form gives.
  torch::manual_seed(5);
  auto p1 = torch::randn({kMembers, 3}).requires_grad_(true);
  auto p2 = p1.detach().clone().requires_grad_(true);
  FusedSGD scalar({p1}, kMembers, {0.03, 0.9, 0.1, 1e-4, 0.0});
  FusedSGD vector({p2}, kMembers, {expanded.lr, expanded.momentum, expanded.dampening, expanded.weight_decay, 0.0});
  for (int step = 0; step < 3; ++step) {
    auto g = torch::randn({kMembers, 3});
    p1.mutable_grad() = g.clone();
    p2.mutable_grad() = g.clone();
    scalar.step();
    vector.step();
  }
  EXPECT_TRUE(torch::equal(p1, p2));
}

TEST(FusedSGD, ANanMemberLeavesTheOthersUntouched) {
  compareWithTorchOptim(perMemberCase(), torch::kCPU, [](int step, const at::Tensor& grad) {
    auto g = grad.clone();
    if (step == 5) g[2].fill_(std::numeric_limits<float>::quiet_NaN());
    return g;
  });
}

TEST(FusedSGD, RejectsAWrongNumberOfValuesAndBadSettings) {
  auto p = torch::zeros({kMembers, 2}).requires_grad_(true);
  EXPECT_THROW(FusedSGD({p}, kMembers, {std::vector<double>{0.1, 0.2}}), std::invalid_argument);
  EXPECT_THROW(FusedSGD({p}, kMembers, {0.1, 0.0, 0.0, 0.0, 1.0}), std::invalid_argument);  // nesterov w/o momentum
  EXPECT_THROW(FusedSGD({torch::zeros({3, 2})}, kMembers, {0.1}), std::invalid_argument);
  EXPECT_THROW(FusedSGD({p}, kMembers, {-0.1}), std::invalid_argument);
}

TEST(FusedSGD, CudaKernelMatchesSeparateTorchOptimizers) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(perMemberCase(), torch::kCUDA);
}

}  // namespace
}  // namespace hfta::optim
