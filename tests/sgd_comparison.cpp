#include "tests/sgd_comparison.h"

#include <gtest/gtest.h>

#include "runtime/sgd.h"
#include "tests/test_support.h"

namespace hfta::optim::testing {
namespace {
constexpr int kSteps = 20;
}  // namespace

using hfta::testing::allClose;

Case perMemberCase() {
  return {{0.1, 0.05, 0.01, 0.2}, {0.0, 0.9, 0.5, 0.9}, {0.0, 0.0, 0.3, 0.0},
          {0.0, 1e-2, 0.0, 1e-3}, {false, true, false, false}};
}

void compareWithTorchOptim(const Case& c, const torch::Device& device,
                           const std::function<at::Tensor(int, const at::Tensor&)>& grad_for) {
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

}  // namespace hfta::optim::testing
