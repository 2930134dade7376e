// The fused optimizers against B separate torch::optim optimizers on the
// same gradients, every hyper-parameter different per member; NaN members,
// state-dict resume, clipping, and bad settings.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>

#include "runtime/optim/clip.h"
#include "runtime/optim/cpu_loop.h"
#include "runtime/optim/optimizers.h"
#include "tests/runtime/optimizer_comparison.h"
#include "tests/test_support.h"

namespace hfta::optim::testing {
namespace {

using hfta::testing::allClose;

// The CPU loop runs the build ATEN_CPU_CAPABILITY asks for: ctest runs the
// optimizer tests a second time with it set to "default" (the build for any
// x86-64), so both builds are tested on an AVX2 machine.
TEST(CpuDispatch, FollowsAtenCpuCapability) {
  const char* asked = std::getenv("ATEN_CPU_CAPABILITY");
  if (asked != nullptr && std::string(asked) == "default") {
    EXPECT_STREQ(cpu::capability(), "DEFAULT");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_STREQ(cpu::capability(), "AVX2");
  } else {
    EXPECT_STREQ(cpu::capability(), "DEFAULT");
  }
}

class TorchOptimCase : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(TorchOptimCase, FiftyStepsMatchSeparateTorchOptimizers) {
  compareWithTorchOptim(GetParam().fused, GetParam().alone, torch::kCPU);
}

// A member whose gradients turn NaN, frozen as hfta-train freezes it: it
// keeps the parameters it had, is reported frozen, and the others train on.
TEST_P(TorchOptimCase, ANanMemberIsFrozenAndTheOthersTrainOn) {
  compareWithTorchOptim(GetParam().fused, GetParam().alone, torch::kCPU, {/*member=*/2, /*step=*/5});
}

// 10 steps, save, a new optimizer loads and takes 10 more: the same
// parameters, bit for bit, as 20 uninterrupted steps.
TEST_P(TorchOptimCase, ResumesExactlyFromASavedState) {
  auto through = stackedParameters();
  auto resumed = stackedParameters();
  for (auto& p : through) p.requires_grad_(true);
  for (auto& p : resumed) p.requires_grad_(true);
  auto uninterrupted = GetParam().fused(through);
  auto first_half = GetParam().fused(resumed);
  const auto path = (std::filesystem::temp_directory_path() / ("hfta_optim_" + GetParam().name + ".pt")).string();
  for (int step = 0; step < 20; ++step) {
    setRandomGradients(through, step);
    uninterrupted->step();
    if (step < 10) {
      setRandomGradients(resumed, step);
      first_half->step();
    }
  }
  first_half->save(path);
  auto second_half = GetParam().fused(resumed);
  second_half->load(path);
  std::remove(path.c_str());
  for (int step = 10; step < 20; ++step) {
    setRandomGradients(resumed, step);
    second_half->step();
  }
  for (size_t i = 0; i < through.size(); ++i) EXPECT_TRUE(torch::equal(through[i], resumed[i])) << "param " << i;
}

TEST_P(TorchOptimCase, RejectsAWrongNumberOfValuesAndSharedParameters) {
  auto params = stackedParameters();
  auto fused = GetParam().fused(params);
  EXPECT_THROW(fused->set_lr(std::vector<double>{0.1, 0.2}), std::invalid_argument);
  EXPECT_THROW(fused->set_lr(-1.0), std::invalid_argument);
  params.push_back(torch::zeros({3, 2}));  // not stacked: shared by all members
  EXPECT_THROW(GetParam().fused(params), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchOptimCase, ::testing::ValuesIn(torchOptimCases()),
                         [](const auto& info) { return info.param.name; });

TEST(FusedOptimizer, ScalarHyperParametersEqualTheirExpandedForm) {
  auto p1 = stackedParameters(), p2 = stackedParameters();
  FusedAdam scalar(p1, kMembers, AdamOptions{0.01, 0.8, 0.99, 1e-7, 1e-3, 1.0});
  FusedAdam expanded(p2, kMembers,
                     AdamOptions{std::vector<double>(kMembers, 0.01), std::vector<double>(kMembers, 0.8),
                                 std::vector<double>(kMembers, 0.99), std::vector<double>(kMembers, 1e-7),
                                 std::vector<double>(kMembers, 1e-3), std::vector<double>(kMembers, 1.0)});
  for (int step = 0; step < 3; ++step) {
    setRandomGradients(p1, step);
    setRandomGradients(p2, step);
    scalar.step();
    expanded.step();
  }
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_TRUE(torch::equal(p1[i], p2[i]));
}

// A frozen member (one that diverged) keeps its parameters, whatever its
// gradients; the others train on exactly as they would without it.
TEST(FusedOptimizer, AFrozenMemberStopsAndTheOthersTrainOn) {
  auto frozen_run = stackedParameters(), plain_run = stackedParameters();
  FusedAdam with_freeze(frozen_run, kMembers, AdamOptions{1e-2});
  FusedAdam without(plain_run, kMembers, AdamOptions{1e-2});
  for (int step = 0; step < 6; ++step) {
    if (step == 3) with_freeze.freeze(1);
    setRandomGradients(frozen_run, step);
    setRandomGradients(plain_run, step);
    if (step >= 3) frozen_run[0].mutable_grad()[1].fill_(std::numeric_limits<float>::quiet_NaN());
    with_freeze.step();
    without.step();
    if (step == 2) EXPECT_FALSE(with_freeze.frozen(1));
  }
  auto at_freeze = stackedParameters();
  FusedAdam three_steps(at_freeze, kMembers, AdamOptions{1e-2});
  for (int step = 0; step < 3; ++step) {
    setRandomGradients(at_freeze, step);
    three_steps.step();
  }
  for (size_t i = 0; i < frozen_run.size(); ++i) {
    EXPECT_TRUE(torch::equal(frozen_run[i][1], at_freeze[i][1])) << "param " << i;
    for (int64_t b : {0, 2, 3}) EXPECT_TRUE(torch::equal(frozen_run[i][b], plain_run[i][b]));
  }
  // The freeze survives a save and load.
  auto params = stackedParameters();
  FusedAdam reloaded(params, kMembers, AdamOptions{1e-2});
  reloaded.load_state_dict(with_freeze.state_dict());
  EXPECT_TRUE(reloaded.frozen(1));
  EXPECT_FALSE(reloaded.frozen(0));
}

// A skipped member (what the loss scaler asks after its overflow) keeps
// its parameters, moments and step count; the others step.
TEST(FusedOptimizer, SkippedMembersStayAsTheyWereAndCountNoStep) {
  auto skipping = stackedParameters(), plain = stackedParameters();
  FusedAdam with_skip(skipping, kMembers, AdamOptions{1e-2});
  FusedAdam without(plain, kMembers, AdamOptions{1e-2});
  setRandomGradients(skipping, 0);
  setRandomGradients(plain, 0);
  with_skip.step({0, 1, 0, 0});
  without.step();
  for (size_t i = 0; i < skipping.size(); ++i) {
    EXPECT_TRUE(torch::equal(skipping[i][1], stackedParameters()[i][1])) << "param " << i;
    EXPECT_TRUE(torch::equal(skipping[i][2], plain[i][2])) << "param " << i;
  }
  const auto saved = with_skip.state_dict().toGenericDict();
  EXPECT_EQ(saved.at("steps").toListRef()[0].toIntVector(), (std::vector<int64_t>{1, 0, 1, 1}));
  const auto exp_avg = saved.at("state").toListRef()[0].toGenericDict().at("exp_avg").toTensor();
  EXPECT_EQ(exp_avg[1].abs().max().item<float>(), 0.0f);
  EXPECT_THROW(with_skip.step({0, 1}), std::invalid_argument);
  // A state saved with one step count per parameter (before counts were
  // per member) loads as that count for every member.
  auto state = without.state_dict().toGenericDict();
  state.insert_or_assign("steps", c10::List<int64_t>(std::vector<int64_t>(skipping.size(), 1)));
  auto params = stackedParameters();
  FusedAdam reloaded(params, kMembers, AdamOptions{1e-2});
  reloaded.load_state_dict(state);
  const auto reloaded_steps = reloaded.state_dict().toGenericDict().at("steps");
  EXPECT_EQ(reloaded_steps.toListRef()[0].toIntVector(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(FusedOptimizer, BadSettingsNameTheMember) {
  auto p = stackedParameters();
  try {
    FusedAdam(p, kMembers, AdamOptions{1e-3, std::vector<double>{0.9, 0.9, 1.0, 0.9}});
    FAIL() << "beta1 = 1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("beta1 of member 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FusedSGD(p, kMembers, SGDOptions{0.1, 0.0, 0.0, 0.0, 1.0}),
               std::invalid_argument);  // nesterov w/o momentum
}

TEST(FusedOptimizer, LoadingAnotherOptimizersStateIsAClearError) {
  auto p = stackedParameters();
  FusedSGD sgd(p, kMembers, SGDOptions{0.1});
  FusedAdam adam(p, kMembers, AdamOptions{});
  try {
    adam.load_state_dict(sgd.state_dict());
    FAIL() << "an SGD state loaded into Adam";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("saved by SGD"), std::string::npos) << e.what();
  }
}

// Each member's gradients are clipped by its own norm, as
// torch::nn::utils::clip_grad_norm_ clips them alone.
TEST(PerMemberClipping, NormAndValueMatchClippingEachMemberAlone) {
  for (double norm_type : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    auto stacked = stackedParameters();
    setRandomGradients(stacked, 0);
    std::vector<std::vector<at::Tensor>> alone(kMembers);
    for (int64_t b = 0; b < kMembers; ++b) {
      for (const auto& p : stacked) {
        alone[b].push_back(p[b].clone());
        alone[b].back().mutable_grad() = p.grad()[b].clone();
      }
    }
    const std::vector<double> max_norm{1.0, 100.0, 0.5, 3.0};
    const auto norms = clip_grad_norm_per_member(stacked, kMembers, max_norm, norm_type);
    for (int64_t b = 0; b < kMembers; ++b) {
      const double norm = torch::nn::utils::clip_grad_norm_(alone[b], max_norm[b], norm_type);
      EXPECT_NEAR(norms[b].item<double>(), norm, 1e-4 * norm) << "member " << b;
      for (size_t i = 0; i < stacked.size(); ++i) {
        EXPECT_TRUE(allClose(stacked[i].grad()[b], alone[b][i].grad(), 1e-6)) << "norm " << norm_type;
      }
    }
  }
  auto stacked = stackedParameters();
  setRandomGradients(stacked, 1);
  const auto before = stacked[0].grad().clone();
  clip_grad_value_per_member(stacked, kMembers, std::vector<double>{0.1, 1.0, 0.5, 10.0});
  for (int64_t b = 0; b < kMembers; ++b) {
    const double c = std::vector<double>{0.1, 1.0, 0.5, 10.0}[b];
    EXPECT_TRUE(torch::equal(stacked[0].grad()[b], before[b].clamp(-c, c))) << "member " << b;
  }
}

TEST(PerMemberClipping, ANanMemberDoesNotChangeTheOthersNorms) {
  auto stacked = stackedParameters();
  setRandomGradients(stacked, 2);
  auto reference = stackedParameters();
  setRandomGradients(reference, 2);
  stacked[1].mutable_grad()[3].fill_(std::numeric_limits<float>::quiet_NaN());
  const auto norms = clip_grad_norm_per_member(stacked, kMembers, 1.0);
  const auto expected = clip_grad_norm_per_member(reference, kMembers, 1.0);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_DOUBLE_EQ(norms[b].item<double>(), expected[b].item<double>());
    EXPECT_TRUE(torch::equal(stacked[0].grad()[b], reference[0].grad()[b]));
  }
  EXPECT_TRUE(std::isnan(norms[3].item<double>()));
}

}  // namespace
}  // namespace hfta::optim::testing
