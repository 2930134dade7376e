// FusedGradScaler: one loss scale per member, torch.amp.GradScaler's rule
// applied to each member alone (tests/python/make_optim_references.py has
// PyTorch's answers), and its state, errors and settings.
#include "runtime/optim/grad_scaler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/optim/optimizers.h"
#include "tests/runtime/grad_scaler_comparison.h"

namespace hfta::optim {
namespace {

// Member 1 is forced to overflow at steps 4, 5, 17 and 30 and member 2 at
// step 10, while member 0 overflows by itself whenever its growing scale
// meets its huge gradients: each skip and back-off is that member's alone.
// HFTA scales the summed loss with one GradScaler, which would skip every
// member's step at each of these steps and back off every member's scale.
TEST(FusedGradScaler, MemberForcedToOverflowSkipsOnlyItsOwnStepWhereHftasSharedScalerSkipsAll_Sgd) {
  testing::compareWithTorchGradScaler("scaler_sgd", at::kCPU);
}

TEST(FusedGradScaler, MemberForcedToOverflowSkipsOnlyItsOwnStepWhereHftasSharedScalerSkipsAll_Adam) {
  // Adam's bias correction counts each member's own steps: the skipped ones do not count.
  testing::compareWithTorchGradScaler("scaler_adam", at::kCPU);
}

TEST(FusedGradScaler, UnscaleThenPerMemberClippingAsTorchsRecipe) {
  testing::compareWithTorchGradScaler("scaler_sgd_clipped", at::kCPU);
}

std::vector<at::Tensor> twoParameters() {
  return {torch::randn({3, 4, 2}).requires_grad_(true), torch::randn({3, 5}).requires_grad_(true)};
}

void backwardScaled(FusedGradScaler& scaler, const std::vector<at::Tensor>& params, double inf_member = -1) {
  auto losses = params[0].pow(2).flatten(1).sum(1) + params[1].flatten(1).sum(1);
  if (inf_member >= 0) losses = losses * torch::tensor({1.0f, 1.0f, 1.0f}).index_put_({int64_t(inf_member)}, INFINITY);
  scaler.scale(losses).sum().backward();
}

TEST(FusedGradScaler, UnscalesEachMemberByItsOwnScale) {
  auto params = twoParameters();
  FusedSGD sgd(params, 3, SGDOptions{});
  GradScalerOptions o;
  o.init_scale = std::vector<double>{2.0, 1024.0, 3.0};
  FusedGradScaler scaler(3, o);
  backwardScaled(scaler, params);
  scaler.unscale_(sgd);
  // d/dp of sum(p^2) is 2p; of sum(p) is 1: unscaled, whatever the scale.
  EXPECT_TRUE(params[0].grad().allclose(2 * params[0].detach(), 1e-6));
  EXPECT_TRUE(params[1].grad().allclose(torch::ones({3, 5}), 1e-6));
  EXPECT_EQ(scaler.found_inf(), (std::vector<uint8_t>{0, 0, 0}));
}

TEST(FusedGradScaler, StateDictResumesTheSameScalesAndCounts) {
  auto params = twoParameters();
  FusedSGD sgd(params, 3, SGDOptions{0.01});
  GradScalerOptions o;
  o.growth_interval = 2;
  FusedGradScaler scaler(3, o), resumed(3);
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    backwardScaled(scaler, params, step == 1 ? 2 : -1);
    scaler.step(sgd);
    scaler.update();
  }
  resumed.load_state_dict(scaler.state_dict());
  EXPECT_EQ(resumed.scales(), scaler.scales());
  EXPECT_EQ(scaler.scales(), (std::vector<double>{131072.0, 131072.0, 32768.0}));
  // One more finite step grows members 0 and 1 (their second in a row), not 2.
  for (auto* s : {&scaler, &resumed}) {
    sgd.zero_grad();
    backwardScaled(*s, params);
    s->step(sgd);
    s->update();
  }
  EXPECT_EQ(resumed.scales(), scaler.scales());
  EXPECT_EQ(scaler.scales(), (std::vector<double>{262144.0, 262144.0, 65536.0}));
  EXPECT_THROW(FusedGradScaler(2).load_state_dict(scaler.state_dict()), std::invalid_argument);
}

TEST(FusedGradScaler, MisuseAndBadSettingsAreRefusedWithTheMember) {
  auto params = twoParameters();
  FusedSGD sgd(params, 3, SGDOptions{});
  FusedGradScaler scaler(3);
  EXPECT_THROW(scaler.update(), std::logic_error);
  backwardScaled(scaler, params);
  scaler.unscale_(sgd);
  EXPECT_THROW(scaler.unscale_(sgd), std::logic_error);
  scaler.step(sgd);
  EXPECT_THROW(scaler.step(sgd), std::logic_error);
  scaler.update();
  GradScalerOptions o;
  o.backoff_factor = std::vector<double>{0.5, 1.5, 0.5};
  try {
    FusedGradScaler bad(3, o);
    FAIL() << "a backoff factor above 1 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("backoff_factor of member 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(scaler.scale(torch::ones({2})), std::invalid_argument);
}

}  // namespace
}  // namespace hfta::optim
