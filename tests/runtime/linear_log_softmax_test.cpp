// hfta::linear_log_softmax in both forms (one batched GEMM and one
// log-softmax; each member's GEMM then its log-softmax) against ATen's
// log_softmax of ATen's linear, member by member, forward and backward.
// float64, so that the forms' different summation orders stay far inside
// kFloat64's tolerance; 45 classes and 40 features, past one vector of 16
// floats, so that AVX2 and AVX-512 builds of ATen take the same loops.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;
using testing::kFloat64;

constexpr int64_t kMembers = 3, kFeatures = 40, kClasses = 45;

class LinearLogSoftmax : public ::testing::TestWithParam<LinearForm> {};

// Output and every gradient, with an upstream gradient that differs per
// element (a log-softmax's backward subtracts its sum), with and without a
// bias, for an input of rank 4 ([B, 2, 3, features]).
TEST_P(LinearLogSoftmax, MatchesAtensLogSoftmaxOfLinearPerMember) {
  const testing::FormScope form(ConvForm::Chosen, GetParam());
  torch::manual_seed(0);
  const auto f64 = torch::dtype(torch::kFloat64);
  for (const bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "with a bias" : "without a bias");
    const auto x = torch::randn({kMembers, 2, 3, kFeatures}, f64).requires_grad_();
    const auto w = (torch::randn({kMembers, kClasses, kFeatures}, f64) * 0.3).requires_grad_();
    const auto b = torch::randn({kMembers, kClasses}, f64).requires_grad_();
    const auto upstream = torch::randn({kMembers, 2, 3, kClasses}, f64);
    const auto y = linear_log_softmax(x, w, with_bias ? std::optional<at::Tensor>(b) : std::nullopt);
    ASSERT_EQ(y.sizes(), upstream.sizes());
    (y * upstream).sum().backward();
    for (int64_t m = 0; m < kMembers; ++m) {
      SCOPED_TRACE("member " + std::to_string(m));
      const auto xm = x[m].detach().requires_grad_(), wm = w[m].detach().requires_grad_();
      const auto bm = b[m].detach().requires_grad_();
      const auto expected =
          torch::log_softmax(torch::nn::functional::linear(xm, wm, with_bias ? bm : at::Tensor()), -1);
      (expected * upstream[m]).sum().backward();
      EXPECT_TRUE(allClose(y[m], expected, kFloat64.forward));
      EXPECT_TRUE(allClose(x.grad()[m], xm.grad(), kFloat64.gradient));
      EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
      if (with_bias) EXPECT_TRUE(allClose(b.grad()[m], bm.grad(), kFloat64.gradient));
    }
    EXPECT_EQ(with_bias, b.grad().defined());
  }
}

// A gradient penalty (the input gradient's square, differentiated again
// with create_graph): the per-member form's backward writes into stacked
// gradients except when its gradients are differentiated again.
TEST_P(LinearLogSoftmax, GradientsCanBeDifferentiatedAgain) {
  const testing::FormScope form(ConvForm::Chosen, GetParam());
  torch::manual_seed(1);
  const auto f64 = torch::dtype(torch::kFloat64);
  const auto x = torch::randn({kMembers, 5, kFeatures}, f64).requires_grad_();
  const auto w = (torch::randn({kMembers, kClasses, kFeatures}, f64) * 0.3).requires_grad_();
  const auto upstream = torch::randn({kMembers, 5, kClasses}, f64);
  const auto y = linear_log_softmax(x, w, std::nullopt);
  const auto grad_x = torch::autograd::grad({(y * upstream).sum()}, {x}, {}, true, true)[0];
  grad_x.square().sum().backward();
  for (int64_t m = 0; m < kMembers; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    const auto xm = x[m].detach().requires_grad_(), wm = w[m].detach().requires_grad_();
    const auto expected = torch::log_softmax(torch::nn::functional::linear(xm, wm), -1);
    const auto expected_grad_x = torch::autograd::grad({(expected * upstream[m]).sum()}, {xm}, {}, true, true)[0];
    expected_grad_x.square().sum().backward();
    EXPECT_TRUE(allClose(grad_x[m], expected_grad_x, kFloat64.gradient));
    EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, LinearLogSoftmax, ::testing::Values(LinearForm::Batched, LinearForm::PerMember),
                         [](const auto& info) { return info.param == LinearForm::Batched ? "batched" : "per_member"; });

// One input all members share ([1, *, features]) takes hfta::linear's
// broadcast GEMM and ATen's log-softmax.
TEST(LinearLogSoftmaxSharedInput, MatchesEachMembersOwn) {
  torch::manual_seed(2);
  const auto f64 = torch::dtype(torch::kFloat64);
  const auto x = torch::randn({1, 7, kFeatures}, f64);
  const auto w = torch::randn({kMembers, kClasses, kFeatures}, f64) * 0.3;
  const auto b = torch::randn({kMembers, kClasses}, f64);
  const auto y = linear_log_softmax(x, w, b);
  for (int64_t m = 0; m < kMembers; ++m) {
    EXPECT_TRUE(
        allClose(y[m], torch::log_softmax(torch::nn::functional::linear(x[0], w[m], b[m]), -1), kFloat64.forward));
  }
}

}  // namespace
}  // namespace hfta::ops
