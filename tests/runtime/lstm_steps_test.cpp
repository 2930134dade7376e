// hfta::lstm in its stepped form, an unprojected LSTM through
// runtime/ops/lstm_steps.cpp, against ATen's own LSTM run on each member
// alone: every output and every gradient (input, initial state, weights),
// both directions, with and without biases, float64 and float32, with a
// loss that reaches the output, h_n and c_n. (tests/passes/ checks whole
// fused models against PyTorch; this pins the kernel's backward directly.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;

// Past 16 lanes, so that AVX2 and AVX-512 builds take the same ATen paths.
constexpr int64_t kMembers = 3, kSteps = 5, kBatch = 4, kInput = 17, kHidden = 20, kLayers = 2;

struct Case {
  bool biases, bidirectional;
  at::ScalarType dtype;
};

struct Run {
  std::vector<at::Tensor> outputs, grads;  // output, h_n, c_n; x, h0, c0, then every weight
};

// Random [B, ...] tensors requiring gradients.
at::Tensor leaf(at::IntArrayRef shape, at::ScalarType dtype) {
  return (torch::randn(shape, torch::dtype(dtype)) * 0.3).requires_grad_();
}

// The loss's weights for output, h_n and c_n, so that each gradient path is
// exercised with values of its own.
std::vector<at::Tensor> lossWeights(const std::vector<at::Tensor>& outputs) {
  std::vector<at::Tensor> weights;
  for (const auto& o : outputs) weights.push_back(torch::randn_like(o));
  return weights;
}

at::Tensor weighted(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& weights) {
  auto loss = torch::zeros({}, outputs[0].options());
  for (size_t i = 0; i < outputs.size(); ++i) loss = loss + (outputs[i] * weights[i]).sum();
  return loss;
}

// Whether a node named `name` is on the autograd graph that ends at `node`.
bool reaches(torch::autograd::Node* node, const std::string& name) {
  if (node == nullptr) return false;
  if (node->name().find(name) != std::string::npos) return true;
  for (const auto& edge : node->next_edges()) {
    if (reaches(edge.function.get(), name)) return true;
  }
  return false;
}

class LstmSteps : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    const auto [biases, bidirectional, dtype] = GetParam();
    directions_ = bidirectional ? 2 : 1;
    x_ = leaf({kMembers, kSteps, kBatch, kInput}, dtype);
    h0_ = leaf({kMembers, kLayers * directions_, kBatch, kHidden}, dtype);
    c0_ = leaf({kMembers, kLayers * directions_, kBatch, kHidden}, dtype);
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      for (int64_t d = 0; d < directions_; ++d) {
        const int64_t in = layer == 0 ? kInput : kHidden * directions_;
        params_.push_back(leaf({kMembers, 4 * kHidden, in}, dtype));
        params_.push_back(leaf({kMembers, 4 * kHidden, kHidden}, dtype));
        if (biases) {
          params_.push_back(leaf({kMembers, 4 * kHidden}, dtype));
          params_.push_back(leaf({kMembers, 4 * kHidden}, dtype));
        }
      }
    }
  }

  std::vector<at::Tensor> leaves() const {
    std::vector<at::Tensor> all{x_, h0_, c0_};
    all.insert(all.end(), params_.begin(), params_.end());
    return all;
  }

  // The fused op, all members at once, stepped.
  std::vector<at::Tensor> fused() const {
    testing::FormScope forms{ConvForm::Chosen, LinearForm::Chosen};  // puts the recurrent form back
    setRecurrentForm(RecurrentForm::Stepped);
    const std::vector<at::Tensor> state{h0_, c0_};
    const auto [y, h_n, c_n] =
        ops::lstm(x_, state, params_, GetParam().biases, kLayers, 0.0, true, GetParam().bidirectional, false);
    return std::vector<at::Tensor>{y, h_n, c_n};
  }

  // Member b through ATen's LSTM alone, on its slices.
  std::vector<at::Tensor> alone(int64_t b) const {
    std::vector<at::Tensor> params;
    for (const auto& p : params_) params.push_back(p[b]);
    const auto [y, h_n, c_n] = at::lstm(x_[b], {h0_[b], c0_[b]}, params, GetParam().biases, kLayers, 0.0, true,
                                        GetParam().bidirectional, false);
    return std::vector<at::Tensor>{y, h_n, c_n};
  }

  int64_t directions_ = 1;
  at::Tensor x_, h0_, c0_;
  std::vector<at::Tensor> params_;
};

TEST_P(LstmSteps, EveryOutputAndGradientMatchesEachMemberAlone) {
  const auto fused_out = fused();
  EXPECT_TRUE(reaches(fused_out[0].grad_fn().get(), "LstmSteps")) << "the stepped LSTM did not run lstm_steps.cpp";
  const auto weights = lossWeights(fused_out);
  const auto inputs = leaves();
  const auto fused_grads = torch::autograd::grad({weighted(fused_out, weights)}, inputs);

  const auto tolerances = testing::tolerancesFor(GetParam().dtype);
  for (int64_t b = 0; b < kMembers; ++b) {
    const auto member_out = alone(b);
    std::vector<at::Tensor> member_weights;
    for (const auto& w : weights) member_weights.push_back(w[b]);
    const auto member_grads = torch::autograd::grad({weighted(member_out, member_weights)}, inputs);
    for (size_t i = 0; i < member_out.size(); ++i) {
      EXPECT_TRUE(allClose(fused_out[i][b], member_out[i], tolerances.forward)) << "output " << i << " member " << b;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_TRUE(allClose(fused_grads[i][b], member_grads[i][b], tolerances.gradient))
          << "gradient of input " << i << " member " << b;
    }
  }
}

TEST_P(LstmSteps, RefusesToBeDifferentiatedTwiceWithAMessage) {
  const auto out = fused();
  try {
    torch::autograd::grad({out[0].sum()}, {x_}, {}, true, /*create_graph=*/true);
    ADD_FAILURE() << "create_graph=True went through the fused LSTM's backward";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be differentiated again"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LstmSteps,
                         ::testing::Values(Case{true, false, at::kDouble}, Case{false, false, at::kDouble},
                                           Case{true, true, at::kDouble}, Case{false, true, at::kDouble},
                                           Case{true, true, at::kFloat}),
                         [](const auto& info) {
                           const auto& c = info.param;
                           return std::string(c.biases ? "Biases" : "NoBiases") +
                                  (c.bidirectional ? "Bidirectional" : "Forward") +
                                  (c.dtype == at::kDouble ? "Float64" : "Float32");
                         });

}  // namespace
}  // namespace hfta::ops
