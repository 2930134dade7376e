// The per-member LR schedulers and Adadelta against torch.optim in Python,
// each member run alone there (tests/python/make_optim_references.py).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/optim/optimizers.h"
#include "runtime/optim/schedulers.h"
#include "tests/runtime/optimizer_comparison.h"
#include "tests/test_support.h"

namespace hfta::optim {
namespace {

using hfta::testing::allClose;
using hfta::testing::Reference;

constexpr int64_t kMembers = 3;
const std::vector<double> kBaseLr{0.1, 0.05, 0.2};

std::vector<at::Tensor> oneParameter() { return {torch::zeros({kMembers, 1}).requires_grad_(true)}; }

// Member b's learning rate (and optimizer hyper-parameter `other`) after
// construction and after each of `epochs` steps, as [epochs + 1, B].
at::Tensor trace(FusedOptimizer& optimizer, const std::function<void()>& step, int epochs,
                 const std::string& key = "lr") {
  std::vector<at::Tensor> rows{torch::tensor(optimizer.hyper(key).expanded(kMembers), torch::kDouble)};
  for (int e = 0; e < epochs; ++e) {
    step();
    rows.push_back(torch::tensor(optimizer.hyper(key).expanded(kMembers), torch::kDouble));
  }
  return torch::stack(rows);
}

class Schedulers : public ::testing::Test {
 protected:
  Reference ref_{"optim_reference.pt"};
  std::vector<at::Tensor> params_ = oneParameter();
  FusedSGD sgd_{params_, kMembers, SGDOptions{kBaseLr, 0.9}};

  void expectTrace(const std::string& name, LRScheduler& scheduler, int epochs = 25) {
    const auto expected = ref_.tensors(name).at("lr");
    EXPECT_TRUE(allClose(trace(
                             sgd_, [&] { scheduler.step(); }, epochs),
                         expected, 1e-12))
        << name;
  }
};

TEST_F(Schedulers, StepLR) {
  StepLR s(sgd_, std::vector<double>{3, 5, 2}, std::vector<double>{0.5, 0.1, 0.9});
  expectTrace("step", s);
}

TEST_F(Schedulers, MultiStepLR) {
  MultiStepLR s(sgd_, {3, 7, 12}, std::vector<double>{0.5, 0.1, 0.9});
  expectTrace("multistep", s);
}

TEST_F(Schedulers, ExponentialLR) {
  ExponentialLR s(sgd_, std::vector<double>{0.9, 0.95, 0.5});
  expectTrace("exponential", s);
}

TEST_F(Schedulers, CosineAnnealingLRPastTMax) {
  CosineAnnealingLR s(sgd_, std::vector<double>{10, 7, 20}, std::vector<double>{0.0, 1e-3, 1e-2});
  expectTrace("cosine", s);
}

TEST_F(Schedulers, LinearLRWarmUp) {
  LinearLR s(sgd_, std::vector<double>{0.1, 0.5, 1.0 / 3}, std::vector<double>{1.0, 0.8, 1.0},
             std::vector<double>{5, 10, 4});
  expectTrace("linear", s);
}

TEST_F(Schedulers, OneCycleLRMovesLearningRateAndMomentum) {
  for (const std::string strategy : {"cos", "linear"}) {
    auto params = oneParameter();
    FusedSGD sgd(params, kMembers, SGDOptions{kBaseLr, 0.9});
    OneCycleOptions o;
    o.max_lr = std::vector<double>{1.0, 0.5, 2.0};
    o.total_steps = 20;
    o.pct_start = std::vector<double>{0.3, 0.25, 0.5};
    o.anneal_strategy = strategy;
    o.base_momentum = std::vector<double>{0.85, 0.8, 0.85};
    o.max_momentum = std::vector<double>{0.95, 0.9, 0.99};
    o.div_factor = std::vector<double>{25.0, 10.0, 25.0};
    o.final_div_factor = std::vector<double>{1e4, 100.0, 1e4};
    OneCycleLR s(sgd, o);
    std::vector<at::Tensor> lr{torch::tensor(sgd.lr().expanded(kMembers), torch::kDouble)};
    std::vector<at::Tensor> momentum{torch::tensor(sgd.hyper("momentum").expanded(kMembers), torch::kDouble)};
    for (int e = 1; e <= 20; ++e) {  // the cycle's 20 learning rates, and torch's one past them
      s.step();
      lr.push_back(torch::tensor(sgd.lr().expanded(kMembers), torch::kDouble));
      momentum.push_back(torch::tensor(sgd.hyper("momentum").expanded(kMembers), torch::kDouble));
    }
    const auto expected = ref_.tensors("onecycle_" + strategy);
    EXPECT_TRUE(allClose(torch::stack(lr), expected.at("lr"), 1e-12)) << strategy;
    EXPECT_TRUE(allClose(torch::stack(momentum), expected.at("momentum"), 1e-12)) << strategy;
    EXPECT_THROW(s.step(), std::out_of_range);
  }
}

TEST_F(Schedulers, ReduceLROnPlateauFollowsEachMembersOwnMetric) {
  PlateauOptions o;
  o.factor = std::vector<double>{0.5, 0.1, 0.2};
  o.patience = std::vector<double>{2, 0, 3};
  o.threshold = std::vector<double>{1e-4, 1e-2, 0.0};
  o.cooldown = std::vector<double>{0, 1, 2};
  o.min_lr = std::vector<double>{0.0, 1e-3, 0.05};
  ReduceLROnPlateau s(sgd_, o);
  const auto expected = ref_.tensors("plateau");
  const auto metrics = expected.at("metrics").contiguous();  // [epochs, B]
  int epoch = 0;
  const auto lr = trace(
      sgd_,
      [&] {
        const auto row = metrics[epoch++];
        s.step(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + kMembers));
      },
      static_cast<int>(metrics.size(0)));
  EXPECT_TRUE(allClose(lr, expected.at("lr"), 1e-12));
  EXPECT_THROW(s.step({1.0}), std::invalid_argument);
}

TEST_F(Schedulers, StateDictResumesTheSchedule) {
  CosineAnnealingLR first(sgd_, std::vector<double>{10, 7, 20});
  for (int e = 0; e < 6; ++e) first.step();
  const auto saved = first.state_dict();
  const auto lr_at_6 = sgd_.lr().expanded(kMembers);
  auto params = oneParameter();
  FusedSGD other(params, kMembers, SGDOptions{kBaseLr});
  CosineAnnealingLR resumed(other, std::vector<double>{10, 7, 20});
  resumed.load_state_dict(saved);
  EXPECT_EQ(other.lr().expanded(kMembers), lr_at_6);
  first.step();
  resumed.step();
  EXPECT_EQ(other.lr().expanded(kMembers), sgd_.lr().expanded(kMembers));
}

TEST(FusedAdadelta, FiftyStepsMatchTorchOptimAdadeltaPerMember) { testing::compareAdadeltaWithTorchOptim(torch::kCPU); }

}  // namespace
}  // namespace hfta::optim
