// hfta::conv in each form (one grouped convolution; each member's own; one
// channels-last grouped convolution; batched GEMMs over the unfolded input)
// against ATen's conv2d member by member: output, the input, weight and bias
// gradients, and gradients differentiated again. float64, so that the
// forms' summation orders stay far inside kFloat64's tolerance; 20 channels
// in and 36 out, past one vector of 16 floats, so that AVX2 and AVX-512
// builds of ATen take the same loops.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;
using testing::kFloat64;

constexpr int64_t kMembers = 3, kChannels = 20, kOutChannels = 36, kBatch = 2;

struct Geometry {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

std::string describe(const Geometry& g) {
  return fmt::format("kernel {} stride {} padding {} dilation {}", fmt::join(g.kernel, "x"), fmt::join(g.stride, ","),
                     fmt::join(g.padding, ","), fmt::join(g.dilation, ","));
}

// A member's slice of a channel-folded [N, B*C, H, W] tensor.
at::Tensor memberSlice(const at::Tensor& folded, int64_t m) {
  const int64_t channels = folded.size(1) / kMembers;
  return folded.narrow(1, m * channels, channels);
}

torch::nn::functional::Conv2dFuncOptions memberOptions(const Geometry& g, const at::Tensor& bias) {
  return torch::nn::functional::Conv2dFuncOptions().bias(bias).stride(g.stride).padding(g.padding).dilation(g.dilation);
}

class HftaConvForms : public ::testing::TestWithParam<ConvForm> {};

// Square and rectangular kernels, strides, paddings and dilations, inputs
// contiguous and channels-last, with and without a bias, and an upstream
// gradient that differs per element.
TEST_P(HftaConvForms, MatchAtensConv2dPerMember) {
  const testing::FormScope form(GetParam(), LinearForm::Chosen);
  torch::manual_seed(0);
  const auto f64 = torch::dtype(torch::kFloat64);
  const std::vector<Geometry> geometries{{{3, 3}, {1, 1}, {1, 1}, {1, 1}},
                                         {{4, 4}, {2, 2}, {1, 1}, {1, 1}},
                                         {{3, 2}, {2, 1}, {0, 1}, {2, 1}},
                                         {{1, 1}, {2, 2}, {0, 0}, {1, 1}}};
  for (const auto& g : geometries) {
    for (const bool with_bias : {true, false}) {
      for (const auto memory_format : {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast}) {
        SCOPED_TRACE(fmt::format("{}, bias {}, {}", describe(g), with_bias,
                                 memory_format == at::MemoryFormat::Contiguous ? "contiguous" : "channels-last"));
        const auto x =
            torch::randn({kBatch, kMembers * kChannels, 9, 7}, f64).contiguous(memory_format).requires_grad_();
        const auto w =
            torch::randn({kMembers, kOutChannels, kChannels, g.kernel[0], g.kernel[1]}, f64).requires_grad_();
        const auto b = torch::randn({kMembers, kOutChannels}, f64).requires_grad_(with_bias);
        const auto y = ops::conv(x, w, with_bias ? std::optional<at::Tensor>(b) : std::nullopt, g.stride, g.padding,
                                 g.dilation, 1);
        const auto upstream = torch::randn_like(y);
        (y * upstream).sum().backward();
        for (int64_t m = 0; m < kMembers; ++m) {
          SCOPED_TRACE("member " + std::to_string(m));
          const auto xm = memberSlice(x, m).detach().requires_grad_(), wm = w[m].detach().requires_grad_();
          const auto bm = b[m].detach().requires_grad_();
          const auto expected = torch::nn::functional::conv2d(xm, wm, memberOptions(g, with_bias ? bm : at::Tensor()));
          (expected * memberSlice(upstream, m)).sum().backward();
          EXPECT_TRUE(allClose(memberSlice(y, m), expected, kFloat64.forward));
          EXPECT_TRUE(allClose(memberSlice(x.grad(), m), xm.grad(), kFloat64.gradient));
          EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
          if (with_bias) EXPECT_TRUE(allClose(b.grad()[m], bm.grad(), kFloat64.gradient));
        }
        EXPECT_EQ(b.grad().defined(), with_bias);
      }
    }
  }
}

// Gradient penalties (the input gradient's square, differentiated again
// with create_graph, as WGAN-GP does with a convolutional critic, and the
// weight gradient's): every form's backward must record ops autograd can
// differentiate, in the input as in the weight.
TEST_P(HftaConvForms, GradientsCanBeDifferentiatedAgain) {
  const testing::FormScope form(GetParam(), LinearForm::Chosen);
  torch::manual_seed(1);
  const auto f64 = torch::dtype(torch::kFloat64);
  const Geometry g{{4, 4}, {2, 2}, {1, 1}, {1, 1}};
  const auto x = torch::randn({kBatch, kMembers * kChannels, 8, 8}, f64).requires_grad_();
  const auto w = torch::randn({kMembers, kOutChannels, kChannels, 4, 4}, f64).requires_grad_();
  const auto b = torch::randn({kMembers, kOutChannels}, f64).requires_grad_();
  const auto y = ops::conv(x, w, b, g.stride, g.padding, g.dilation, 1);
  const auto grads = torch::autograd::grad({y.tanh().sum()}, {x, w}, {}, true, true);
  const auto &grad_x = grads[0], &grad_w = grads[1];
  (grad_x.square().sum() + grad_w.square().sum()).backward();
  for (int64_t m = 0; m < kMembers; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    const auto xm = memberSlice(x, m).detach().requires_grad_(), wm = w[m].detach().requires_grad_();
    const auto bm = b[m].detach().requires_grad_();
    const auto expected = torch::nn::functional::conv2d(xm, wm, memberOptions(g, bm));
    const auto expected_grads = torch::autograd::grad({expected.tanh().sum()}, {xm, wm}, {}, true, true);
    (expected_grads[0].square().sum() + expected_grads[1].square().sum()).backward();
    EXPECT_TRUE(allClose(memberSlice(grad_x, m), expected_grads[0], kFloat64.gradient));
    EXPECT_TRUE(allClose(grad_w[m], expected_grads[1], kFloat64.gradient));
    EXPECT_TRUE(allClose(memberSlice(x.grad(), m), xm.grad(), kFloat64.gradient));
    EXPECT_TRUE(allClose(w.grad()[m], wm.grad(), kFloat64.gradient));
    EXPECT_TRUE(allClose(b.grad()[m], bm.grad(), kFloat64.gradient));
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, HftaConvForms,
                         ::testing::Values(ConvForm::Grouped, ConvForm::PerMember, ConvForm::ChannelsLast,
                                           ConvForm::Unfolded),
                         [](const auto& info) {
                           switch (info.param) {
                             case ConvForm::PerMember:
                               return "per_member";
                             case ConvForm::ChannelsLast:
                               return "channels_last";
                             case ConvForm::Unfolded:
                               return "unfolded";
                             default:
                               return "grouped";
                           }
                         });

}  // namespace
}  // namespace hfta::ops
