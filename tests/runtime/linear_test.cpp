// hfta::linear in both forms (one batched GEMM in one autograd node; each
// member's own GEMM) against ATen's linear member by member: output, the
// input, weight and bias gradients, and gradients differentiated again.
// float64, so that the forms' summation orders stay far inside kFloat64's
// tolerance; 40 features and 36 outputs, past one vector of 16 floats, so
// that AVX2 and AVX-512 builds of ATen take the same loops.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;
using testing::kFloat64;

constexpr int64_t kMembers = 3, kFeatures = 40, kOutputs = 36;

class HftaLinearForms : public ::testing::TestWithParam<LinearForm> {};

// An upstream gradient that differs per element, inputs of rank 2, 3 (the
// batched node's own shape, no view) and 4, with and without a bias.
TEST_P(HftaLinearForms, MatchAtensLinearPerMember) {
  const testing::FormScope form(ConvForm::Chosen, GetParam());
  torch::manual_seed(0);
  const auto f64 = torch::dtype(torch::kFloat64);
  for (const bool with_bias : {true, false}) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {kMembers, kFeatures}, {kMembers, 5, kFeatures}, {kMembers, 2, 3, kFeatures}}) {
      SCOPED_TRACE(fmt::format("bias {}, input rank {}", with_bias, shape.size()));
      const auto x = torch::randn(shape, f64).requires_grad_();
      const auto w = torch::randn({kMembers, kOutputs, kFeatures}, f64).requires_grad_();
      const auto b = torch::randn({kMembers, kOutputs}, f64).requires_grad_(with_bias);
      const auto y = ops::linear(x, w, with_bias ? std::optional<at::Tensor>(b) : std::nullopt);
      auto upstream_shape = shape;
      upstream_shape.back() = kOutputs;
      const auto upstream = torch::randn(upstream_shape, f64);
      (y * upstream).sum().backward();
      for (int64_t m = 0; m < kMembers; ++m) {
        SCOPED_TRACE("member " + std::to_string(m));
        const auto xm = x[m].detach().requires_grad_(), wm = w[m].detach().requires_grad_();
        const auto bm = b[m].detach().requires_grad_();
        const auto expected = torch::nn::functional::linear(xm, wm, with_bias ? bm : at::Tensor());
        (expected * upstream[m]).sum().backward();
        EXPECT_TRUE(allClose(y[m], expected, kFloat64.forward));
        EXPECT_TRUE(allClose(x.grad()[m], xm.grad(), kFloat64.gradient));
        EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
        if (with_bias) EXPECT_TRUE(allClose(b.grad()[m], bm.grad(), kFloat64.gradient));
      }
      EXPECT_EQ(b.grad().defined(), with_bias);
    }
  }
}

// A gradient penalty (the input gradient's square, differentiated again
// with create_graph, as WGAN-GP does): both forms' backward must record
// ops autograd can differentiate.
TEST_P(HftaLinearForms, GradientsCanBeDifferentiatedAgain) {
  const testing::FormScope form(ConvForm::Chosen, GetParam());
  torch::manual_seed(1);
  const auto f64 = torch::dtype(torch::kFloat64);
  const auto x = torch::randn({kMembers, 5, kFeatures}, f64).requires_grad_();
  const auto w = torch::randn({kMembers, kOutputs, kFeatures}, f64).requires_grad_();
  const auto b = torch::randn({kMembers, kOutputs}, f64).requires_grad_();
  const auto grad_x = torch::autograd::grad({ops::linear(x, w, b).tanh().sum()}, {x}, {}, true, true)[0];
  grad_x.square().sum().backward();
  for (int64_t m = 0; m < kMembers; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    const auto xm = x[m].detach().requires_grad_(), wm = w[m].detach().requires_grad_();
    const auto bm = b[m].detach().requires_grad_();
    const auto expected = torch::nn::functional::linear(xm, wm, bm);
    const auto expected_grad_x = torch::autograd::grad({expected.tanh().sum()}, {xm}, {}, true, true)[0];
    expected_grad_x.square().sum().backward();
    EXPECT_TRUE(allClose(grad_x[m], expected_grad_x, kFloat64.gradient));
    EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
    EXPECT_TRUE(allClose(b.grad()[m], bm.grad(), kFloat64.gradient));
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, HftaLinearForms, ::testing::Values(LinearForm::Batched, LinearForm::PerMember),
                         [](const auto& info) { return info.param == LinearForm::Batched ? "batched" : "per_member"; });

}  // namespace
}  // namespace hfta::ops
