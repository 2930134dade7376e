#include "tests/runtime/grad_scaler_comparison.h"

#include <gtest/gtest.h>

#include "runtime/optim/clip.h"
#include "runtime/optim/grad_scaler.h"
#include "runtime/optim/optimizers.h"
#include "tests/test_support.h"

namespace hfta::optim::testing {
namespace {

constexpr int64_t kMembers = 3;

// The settings make_optim_references.py gives each member.
std::unique_ptr<FusedOptimizer> optimizerFor(const std::string& reference, const std::vector<at::Tensor>& params) {
  if (reference == "scaler_adam") {
    AdamOptions o;
    o.lr = std::vector<double>{1e-2, 1e-3, 5e-3};
    o.beta1 = std::vector<double>{0.9, 0.8, 0.9};
    o.beta2 = std::vector<double>{0.999, 0.99, 0.9};
    return std::make_unique<FusedAdam>(params, kMembers, o);
  }
  SGDOptions o;
  o.lr = std::vector<double>{0.1, 0.05, 0.2};
  o.momentum = std::vector<double>{0.9, 0.5, 0.0};
  if (reference == "scaler_sgd") o.dampening = std::vector<double>{0.1, 0.0, 0.0};
  return std::make_unique<FusedSGD>(params, kMembers, o);
}

}  // namespace

void compareWithTorchGradScaler(const std::string& reference, at::Device device) {
  hfta::testing::Reference ref("optim_reference.pt");
  const auto init = ref.tensors(reference + "_init"), coefs = ref.tensors(reference + "_coefs"),
             expected_params = ref.tensors(reference + "_params");
  const auto expected_scales = ref.tensor(reference + "_scales"), expected_skipped = ref.tensor(reference + "_skipped");
  const std::vector<std::string> names{"p0", "p1"};
  std::vector<at::Tensor> params;
  for (const auto& name : names) params.push_back(init.at(name).to(device).requires_grad_(true));
  auto optimizer = optimizerFor(reference, params);
  GradScalerOptions o;
  o.init_scale = std::vector<double>{65536.0, 1024.0, 3000.0};
  o.growth_factor = std::vector<double>{2.0, 4.0, 2.0};
  o.backoff_factor = std::vector<double>{0.5, 0.25, 0.5};
  o.growth_interval = std::vector<double>{3, 5, 2000};
  FusedGradScaler scaler(kMembers, o);
  const int64_t steps = expected_scales.size(0);
  for (int64_t step = 0; step < steps; ++step) {
    optimizer->zero_grad();
    // Member b's loss: sum(p[b] * c[b]) over the parameters.
    at::Tensor losses = at::zeros({kMembers}, params[0].options());
    for (size_t i = 0; i < params.size(); ++i) {
      losses = losses + (params[i] * coefs.at(names[i])[step].to(device)).flatten(1).sum(1);
    }
    scaler.scale(losses).sum().backward();
    if (reference == "scaler_sgd_clipped") {
      scaler.unscale_(*optimizer);
      clip_grad_norm_per_member(params, kMembers, std::vector<double>{1.0, 0.5, 2.0});
    }
    const auto skipped = scaler.step(*optimizer);
    scaler.update();
    const auto scales = scaler.scales();
    for (int64_t b = 0; b < kMembers; ++b) {
      EXPECT_EQ(scales[b], expected_scales[step][b].item<double>()) << reference << " step " << step << " member " << b;
      EXPECT_EQ(skipped[b] != 0, expected_skipped[step][b].item<bool>())
          << reference << " step " << step << " member " << b;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      // float32 updates in torch's order per member; the fused kernels'
      // arithmetic may fuse a multiply-add where torch rounds twice.
      EXPECT_TRUE(hfta::testing::allClose(params[i].detach().cpu(), expected_params.at(names[i])[step], 1e-5))
          << reference << " " << names[i] << " after step " << step;
    }
  }
}

}  // namespace hfta::optim::testing
