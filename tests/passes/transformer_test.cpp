// Transformers (the word LM and BERT of examples/text.py, nn.MultiheadAttention
// and nn.TransformerEncoder in their forms, the activation zoo): zero
// fallbacks, and per member the trajectories of Adadelta + StepLR (HFTA's
// examples) and AdamW with per-member settings, against each member trained
// alone by torch.optim (tests/python/make_text_models.py). Forward,
// gradients, SGD steps and eval mode run in FusionEquivalence.
#include <gtest/gtest.h>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "runtime/optim/optimizers.h"
#include "runtime/optim/schedulers.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

using testing::allClose;
using testing::Reference;

const std::vector<std::string> kFamilies = {"lm_tiny",
                                            "lm_tiny_tied",
                                            "lm_tiny_f32",
                                            "bert_tiny",
                                            "bert_tiny_f32",
                                            "mha_weights_padding_causal",
                                            "mha_seq_first_padding",
                                            "mha_bool_mask",
                                            "mha_seq_first_head_weights",
                                            "encoder_post_relu_causal",
                                            "encoder_pre_gelu_padding",
                                            "encoder_post_gelu_nested",
                                            "activation_zoo"};

PerMember perMember(const Reference& ref, const std::string& key) {
  auto t = ref.tensor(key).contiguous();
  return PerMember(std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
}

at::Tensor firstOutput(const c10::IValue& out) {
  return out.isTuple() ? out.toTupleRef().elements()[0].toTensor() : out.toTensor();
}

// The reference's loss (each member's mean squared error of its first
// output, summed) over its batches, stepping `optimizer` and then
// `scheduler` (if any) after each batch.
void train(torch::jit::Module& fused, const Reference& ref, optim::FusedOptimizer& optimizer,
           optim::LRScheduler* scheduler) {
  const auto xs = ref.tensor("x");
  const auto ys = ref.tensor("y");
  for (int64_t step = 0; step < xs.size(0); ++step) {
    optimizer.zero_grad();
    const auto out = firstOutput(fused.forward({xs[step]}));
    (out - ys[step]).pow(2).flatten(1).mean(1).sum().backward();
    optimizer.step();
    if (scheduler) scheduler->step();
  }
}

class TransformerTraining : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ref_ = Reference(GetParam() + "_reference.pt");
    const auto dtype = ref_.tensor("y").scalar_type();  // the members' (x may hold token ids)
    tolerance_ = testing::trainedTolerance(dtype, ref_.tensor("sensitivity").item<double>());
    fused_ = fuse(loadMembers(testing::memberPaths(GetParam())));
  }

  void expectTrained(const std::string& key) {
    const auto trained = ref_.tensors(key);
    ASSERT_EQ(trained.size(), distinctNamedParameters(fused_.module).size());
    for (const auto& p : distinctNamedParameters(fused_.module)) {
      EXPECT_TRUE(allClose(p.value, trained.at(p.name), tolerance_)) << p.name;
    }
  }

  Reference ref_;
  double tolerance_ = 0;
  FusionResult fused_;
};

TEST_P(TransformerTraining, FusesWithoutFallback) {
  EXPECT_TRUE(fused_.report.fallbacks.empty()) << fused_.report.text();
}

TEST_P(TransformerTraining, AdadeltaWithStepLRMatchesEachMemberAlone) {
  optim::FusedAdadelta adadelta(distinctParameters(fused_.module), 3,
                                {perMember(ref_, "adadelta_lr"), perMember(ref_, "adadelta_rho"),
                                 perMember(ref_, "adadelta_eps"), perMember(ref_, "adadelta_weight_decay")});
  optim::StepLR schedule(adadelta, perMember(ref_, "adadelta_step_size"), perMember(ref_, "adadelta_gamma"));
  train(fused_.module, ref_, adadelta, &schedule);
  expectTrained("adadelta_trained");
}

TEST_P(TransformerTraining, AdamWMatchesEachMemberAlone) {
  optim::AdamOptions options;
  options.lr = perMember(ref_, "adamw_lr");
  options.beta1 = perMember(ref_, "adamw_beta1");
  options.beta2 = perMember(ref_, "adamw_beta2");
  options.eps = perMember(ref_, "adamw_eps");
  options.weight_decay = perMember(ref_, "adamw_weight_decay");
  optim::FusedAdamW adamw(distinctParameters(fused_.module), 3, options);
  train(fused_.module, ref_, adamw, nullptr);
  expectTrained("adamw_trained");
}

INSTANTIATE_TEST_SUITE_P(Families, TransformerTraining, ::testing::ValuesIn(kFamilies));

// A padding token's embedding row gets no gradient in any member (HFTA's
// embedding zeroed member 0's only).
TEST(Embedding, PaddingRowGetsNoGradientInAnyMember) {
  Reference ref("bert_tiny_reference.pt");
  auto fused = fuse(loadMembers(testing::memberPaths("bert_tiny")));
  const auto x = ref.tensor("x")[0];
  ASSERT_TRUE((x == 0).any().item<bool>()) << "the test batch should hold padding";
  firstOutput(fused.module.forward({x})).pow(2).sum().backward();
  const auto grad = fused.module.attr("token_embedding").toModule().attr("weight").toTensor().grad();
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(grad[b][0].eq(0).all().item<bool>()) << "member " << b;
    EXPECT_GT(grad[b].abs().sum().item<double>(), 0) << "member " << b << "'s other rows";
  }
}

// Identical members (one seed) on one shared input: in training each draws
// its own rrelu slopes and attention-dropout masks; in eval they agree.
TEST(RandomMasks, EachMemberDrawsItsOwnRReluSlopesAndAttentionDropout) {
  auto fused = fuse(loadMembers(testing::memberPaths("random_masks")), {/*shared_input=*/true});
  EXPECT_TRUE(fused.report.fallbacks.empty()) << fused.report.text();
  const auto x = torch::randn({4, 8, 16});
  fused.module.eval();
  const auto same = fused.module.forward({x}).toTensor();
  EXPECT_TRUE(allClose(same[0], same[1], 1e-6));
  EXPECT_TRUE(allClose(same[1], same[2], 1e-6));
  fused.module.train();
  const auto y = fused.module.forward({x}).toTensor();
  EXPECT_FALSE(at::allclose(y[0], y[1]));
  EXPECT_FALSE(at::allclose(y[1], y[2]));
}

// nn.TransformerEncoder with mask_check=False would pack a padded batch into
// nested tensors in eval without checking it can; a fused array cannot hold
// them, so the fused module stops there with a message saying what to do
// (training mode and a checked mask take the padded path).
TEST(NestedTensors, UncheckedMaskInEvalStopsWithAMessage) {
  auto fused = fuse(loadMembers(testing::memberPaths("encoder_nested_unchecked")));
  EXPECT_TRUE(fused.report.fallbacks.empty()) << fused.report.text();
  auto x = torch::randn({3, 4, 8, 16});
  fused.module.train();
  EXPECT_NO_THROW(fused.module.forward({x}));
  fused.module.eval();
  torch::NoGradGuard no_grad;
  try {
    fused.module.forward({x});
    FAIL() << "expected the nested-tensor path to stop";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("mask_check=True"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hfta
