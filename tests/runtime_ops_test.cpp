// The hfta:: ops against the ATen op applied to each member alone, forward
// and backward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;

constexpr int64_t kMembers = 3;

TEST(HftaLinear, MatchesEachMembersLinearForAnyInputRank) {
  torch::manual_seed(0);
  const auto w = torch::randn({kMembers, 6, 4}, torch::requires_grad());
  const auto bias = torch::randn({kMembers, 6}, torch::requires_grad());
  for (const std::vector<int64_t>& member_shape : std::vector<std::vector<int64_t>>{{4}, {5, 4}, {2, 5, 4}}) {
    std::vector<int64_t> shape{kMembers};
    shape.insert(shape.end(), member_shape.begin(), member_shape.end());
    const auto x = torch::randn(shape);
    const auto y = ops::linear(x, w, bias);
    for (int64_t b = 0; b < kMembers; ++b) {
      EXPECT_TRUE(allClose(y[b], torch::nn::functional::linear(x[b], w[b], bias[b]), 1e-6));
    }
    // Backward: each member's weight gradient is its own.
    const auto weight_grad =
        torch::autograd::grad(torch::autograd::variable_list{y.sum()}, torch::autograd::variable_list{w})[0];
    for (int64_t b = 0; b < kMembers; ++b) {
      auto wb = w[b].detach().requires_grad_(true);
      torch::nn::functional::linear(x[b], wb, bias[b].detach()).sum().backward();
      EXPECT_TRUE(allClose(weight_grad[b], wb.grad(), 1e-5));
    }
  }
}

TEST(HftaLinear, SharedInputBroadcastsWithoutCopies) {
  const auto w = torch::randn({kMembers, 6, 4});
  const auto x = torch::randn({5, 4});
  const auto y = ops::linear(x.unsqueeze(0), w, std::nullopt);
  for (int64_t b = 0; b < kMembers; ++b) {
    EXPECT_TRUE(allClose(y[b], torch::nn::functional::linear(x, w[b]), 1e-6));
  }
}

TEST(HftaMatmul, MatchesTorchMatmulPerMemberForVectorsAndMatrices) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases{
      {{4}, {4}}, {{4}, {4, 3}}, {{5, 4}, {4}}, {{5, 4}, {4, 3}}, {{2, 5, 4}, {4, 3}}};
  for (const auto& [a_shape, b_shape] : cases) {
    auto stacked = [](std::vector<int64_t> s) {
      s.insert(s.begin(), kMembers);
      return torch::randn(s);
    };
    const auto a = stacked(a_shape), b = stacked(b_shape);
    const auto y = ops::matmul(a, b);
    for (int64_t m = 0; m < kMembers; ++m) EXPECT_TRUE(allClose(y[m], torch::matmul(a[m], b[m]), 1e-6));
  }
}

TEST(HftaAddmm, MatchesTorchAddmmPerMember) {
  const auto bias = torch::randn({kMembers, 3});
  const auto m1 = torch::randn({kMembers, 5, 4});
  const auto m2 = torch::randn({kMembers, 4, 3});
  const auto y = ops::addmm(bias, m1, m2, 0.5, 2.0);
  for (int64_t b = 0; b < kMembers; ++b) {
    EXPECT_TRUE(allClose(y[b], torch::addmm(bias[b], m1[b], m2[b], 0.5, 2.0), 1e-6));
  }
}

TEST(HftaAlign, LinesUpMemberDimsForBroadcasting) {
  const auto x = torch::randn({kMembers, 5, 4});
  const auto bias = torch::randn({kMembers, 4});
  EXPECT_EQ(ops::align(bias, x).sizes().vec(), (std::vector<int64_t>{kMembers, 1, 4}));
  EXPECT_EQ(ops::align(x, bias).sizes().vec(), x.sizes().vec());
  const auto sum = ops::align(x, bias) + ops::align(bias, x);
  for (int64_t b = 0; b < kMembers; ++b) EXPECT_TRUE(allClose(sum[b], x[b] + bias[b], 0));
  EXPECT_EQ(stacked_dim(0), 1);
  EXPECT_EQ(stacked_dim(-1), -1);
}

}  // namespace
}  // namespace hfta::ops
