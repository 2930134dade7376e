// The hfta:: ops against the ATen op applied to each member alone, forward
// and backward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;

constexpr int64_t kMembers = 3;

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

// The fast path of nn.MultiheadAttention for stacked weights against ATen's
// own op per member, with per-member key padding masks as float (added) and
// as bool (true where masked) masks, need_weights on and off. Tolerance: a
// float32 attention over 16-wide heads in another kernel (1e-5 relative).
TEST(HftaNativeMultiHeadAttention, MatchesAtenPerMemberWithFloatAndBoolMasks) {
  torch::manual_seed(0);
  constexpr int64_t kBatch = 2, kLength = 5, kEmbed = 16, kHeads = 2;
  const auto x = torch::randn({kMembers, kBatch, kLength, kEmbed});
  const auto qkv_w = torch::randn({kMembers, 3 * kEmbed, kEmbed}) * 0.2;
  const auto qkv_b = torch::randn({kMembers, 3 * kEmbed}) * 0.1;
  const auto proj_w = torch::randn({kMembers, kEmbed, kEmbed}) * 0.2;
  const auto proj_b = torch::randn({kMembers, kEmbed}) * 0.1;
  auto padded = torch::zeros({kMembers, kBatch, kLength}, torch::kBool);
  padded.index_put_({0, 1, torch::indexing::Slice(3)}, true);
  padded.index_put_({2, 0, 4}, true);
  const auto additive = torch::zeros(padded.sizes()).masked_fill(padded, -std::numeric_limits<float>::infinity());
  for (const auto& mask : {additive, padded}) {
    for (bool need_weights : {true, false}) {
      const auto [out, weights] = ops::native_multi_head_attention(x, x, x, kEmbed, kHeads, qkv_w, qkv_b, proj_w,
                                                                   proj_b, mask, need_weights, true, /*mask_type=*/1);
      for (int64_t b = 0; b < kMembers; ++b) {
        const auto [alone, alone_weights] = at::_native_multi_head_attention(
            x[b], x[b], x[b], kEmbed, kHeads, qkv_w[b], qkv_b[b], proj_w[b], proj_b[b], mask[b], need_weights, true, 1);
        EXPECT_TRUE(allClose(out[b], alone, 1e-5)) << "member " << b << " need_weights " << need_weights;
        if (need_weights) EXPECT_TRUE(allClose(weights[b], alone_weights, 1e-5)) << "member " << b;
      }
    }
  }
}

// A float mask whose dtype is not the queries' (examples/text.py builds its
// causal mask in float32 for a float64 model), over 24 keys: past one
// vector of 16 floats, so that AVX2 and AVX-512 builds of ATen take the
// same loops. The fast paths read the mask as masked where nonzero (a
// finite -1 too); before the fix the fused ops added it, and ATen's CPU
// flash kernel left part of each vector of keys unmasked. Tolerance: the
// same float64 attention in other kernels (1e-10 relative).
TEST(HftaTransformerFastPaths, TakeAFloat32MaskForFloat64QueriesAsAtenDoes) {
  torch::manual_seed(0);
  constexpr int64_t kBatch = 2, kLength = 24, kEmbed = 16, kHeads = 2, kHidden = 32;
  const auto f64 = torch::dtype(torch::kFloat64);
  const auto x = torch::randn({kMembers, kBatch, kLength, kEmbed}, f64);
  const auto qkv_w = torch::randn({kMembers, 3 * kEmbed, kEmbed}, f64) * 0.2;
  const auto qkv_b = torch::randn({kMembers, 3 * kEmbed}, f64) * 0.1;
  const auto proj_w = torch::randn({kMembers, kEmbed, kEmbed}, f64) * 0.2;
  const auto proj_b = torch::randn({kMembers, kEmbed}, f64) * 0.1;
  const auto norm_w = torch::rand({kMembers, 2, kEmbed}, f64) + 0.5;
  const auto norm_b = torch::randn({kMembers, 2, kEmbed}, f64) * 0.1;
  const auto ffn_w1 = torch::randn({kMembers, kHidden, kEmbed}, f64) * 0.2;
  const auto ffn_b1 = torch::randn({kMembers, kHidden}, f64) * 0.1;
  const auto ffn_w2 = torch::randn({kMembers, kEmbed, kHidden}, f64) * 0.2;
  const auto ffn_b2 = torch::randn({kMembers, kEmbed}, f64) * 0.1;
  const auto causal = torch::full({kLength, kLength}, -std::numeric_limits<float>::infinity()).triu(1);
  const auto finite = torch::full({kLength, kLength}, -1.0f).triu(1);
  for (const auto& member_mask : {causal, finite}) {
    const auto mask = member_mask.unsqueeze(0);  // one mask for every member: [1, L, S]
    const auto attention = std::get<0>(ops::native_multi_head_attention(x, x, x, kEmbed, kHeads, qkv_w, qkv_b, proj_w,
                                                                        proj_b, mask, false, true, /*mask_type=*/0));
    const auto layer = ops::transformer_encoder_layer_fwd(
        x, kEmbed, kHeads, qkv_w, qkv_b, proj_w, proj_b, /*use_gelu=*/false, /*norm_first=*/false, 1e-5,
        norm_w.select(1, 0), norm_b.select(1, 0), norm_w.select(1, 1), norm_b.select(1, 1), ffn_w1, ffn_b1, ffn_w2,
        ffn_b2, mask, /*mask_type=*/0);
    for (int64_t b = 0; b < kMembers; ++b) {
      const auto alone_attention = std::get<0>(at::_native_multi_head_attention(
          x[b], x[b], x[b], kEmbed, kHeads, qkv_w[b], qkv_b[b], proj_w[b], proj_b[b], member_mask, false, true, 0));
      EXPECT_TRUE(allClose(attention[b], alone_attention, 1e-10)) << "attention, member " << b;
      const auto alone_layer = at::_transformer_encoder_layer_fwd(
          x[b], kEmbed, kHeads, qkv_w[b], qkv_b[b], proj_w[b], proj_b[b], false, false, 1e-5, norm_w[b][0],
          norm_b[b][0], norm_w[b][1], norm_b[b][1], ffn_w1[b], ffn_b1[b], ffn_w2[b], ffn_b2[b], member_mask, 0);
      EXPECT_TRUE(allClose(layer[b], alone_layer, 1e-10)) << "encoder layer, member " << b;
    }
  }
}

}  // namespace
}  // namespace hfta::ops
