// FusedSGD against B separate torch::optim::SGD optimizers on the same
// gradients, with every hyper-parameter different per member.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/sgd.h"
#include "tests/sgd_comparison.h"

namespace hfta::optim::testing {
namespace {

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

}  // namespace
}  // namespace hfta::optim::testing
