// The promise: per member, the fused module's forward, gradients and SGD
// trajectory are those of the member alone, with PyTorch (scripted from
// Python, trained with torch.optim.SGD) as the oracle.
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "runtime/optim/optimizers.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

using testing::allClose;
using testing::Reference;

at::Tensor firstOutput(const c10::IValue& out) {
  return out.isTuple() ? out.toTupleRef().elements()[0].toTensor() : out.toTensor();
}

at::Tensor summedMemberLoss(const at::Tensor& output, const at::Tensor& target) {
  // Each member's mean squared error, summed: member b's gradient is its own.
  return (output - target).pow(2).flatten(1).mean(/*dim=*/1).sum();
}

optim::SGDOptions sgdOptionsFrom(const Reference& ref) {
  auto values = [&](const char* key) {
    auto t = ref.tensor(key).contiguous();
    return PerMember(std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
  };
  return {values("lr"), values("momentum"), values("dampening"), values("weight_decay"), values("nesterov")};
}

// Trains the fused module on the reference's batches with FusedSGD set up
// from the reference's per-member settings.
void trainFused(torch::jit::Module& fused, const Reference& ref, const c10::Device& device = c10::kCPU) {
  const auto xs = ref.tensor("x").to(device);
  const auto ys = ref.tensor("y").to(device);
  optim::FusedSGD sgd(distinctParameters(fused), xs.size(1), sgdOptionsFrom(ref));
  for (int64_t step = 0; step < xs.size(0); ++step) {
    sgd.zero_grad();
    summedMemberLoss(firstOutput(fused.forward({xs[step]})), ys[step]).backward();
    sgd.step();
  }
}

// A kind with the suffix "+per-member-conv" runs every convolution as B
// dense ones, "+channels-last-conv" as one channels-last grouped one,
// "+unfolded-conv" as batched GEMMs over the unfolded input,
// "+per-member-linear" every linear as B GEMMs, "+per-member-recurrent"
// ("+stepped-recurrent") every recurrent layer as the members' own ATen ops
// (all members per time step) (testing::FormScope); with
// "+exported" the members are the same models' torch.export archives; with
// "+cuda" the fused module runs on the GPU (skipped where there is none),
// against the same PyTorch reference on the CPU.
class FusionEquivalence : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (device_.is_cuda()) {
      if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
      // cuDNN's TF32 convolutions round float32 inputs to 10 significand
      // bits: another dtype than the reference's float32.
      at::globalContext().setAllowTF32CuDNN(false);
    }
    ref_ = Reference(kind_ + "_reference.pt");
    const auto dtype = ref_.tensor("y").scalar_type();  // the members' (x may hold token ids)
    tolerance_ = testing::tolerancesFor(dtype);
    tolerance_.trained = testing::trainedTolerance(dtype, ref_.tensor("sensitivity").item<double>());
    fused_ = fuse(loadMembers(memberPaths()));
    fused_.module.to(device_);
  }
  std::vector<std::string> memberPaths() const { return testing::memberPaths(kind_, 3, exported_); }
  // Member b's batches of the reference, on the test's device.
  at::Tensor input(const char* key) const { return ref_.tensor(key)[0].to(device_); }
  std::string kind_ = GetParam();
  testing::FormScope forms_{kind_};
  bool exported_ = testing::takeExported(kind_);
  c10::Device device_ = testing::takeDevice(kind_);
  Reference ref_;
  testing::Tolerances tolerance_{};  // the members' dtype's
  FusionResult fused_;
};

TEST_P(FusionEquivalence, ForwardMatchesEachMember) {
  const auto x = input("x");  // [B, N, ...]: member b's own batch
  const auto out = firstOutput(fused_.module.forward({x}));
  EXPECT_TRUE(allClose(out, ref_.tensor("outputs"), tolerance_.forward));
}

TEST_P(FusionEquivalence, GradientsOfSummedLossMatchEachMembersOwn) {
  const auto x = input("x");
  const auto y = input("y");
  summedMemberLoss(firstOutput(fused_.module.forward({x})), y).backward();
  const auto grads = ref_.tensors("grads");
  ASSERT_EQ(grads.size(), distinctNamedParameters(fused_.module).size());
  const double scale = testing::gradientScale(grads);
  for (const auto& p : distinctNamedParameters(fused_.module)) {
    ASSERT_TRUE(p.value.grad().defined()) << p.name;
    EXPECT_TRUE(allClose(p.value.grad(), grads.at(p.name), tolerance_.gradient, scale)) << p.name;
  }
}

// 20 steps for the small families, 5 for the published CNNs.
TEST_P(FusionEquivalence, SgdStepsWithPerMemberSettingsMatchTrainingAlone) {
  trainFused(fused_.module, ref_, device_);
  const auto trained = ref_.tensors("trained");
  ASSERT_EQ(trained.size(), distinctNamedParameters(fused_.module).size());
  for (const auto& p : distinctNamedParameters(fused_.module)) {
    EXPECT_TRUE(allClose(p.value, trained.at(p.name), tolerance_.trained)) << p.name;
  }
  // Batch-norm statistics: each member's running mean, variance and
  // num_batches_tracked are its own, as after training alone.
  const auto buffers = ref_.tensors("buffers");
  ASSERT_EQ(buffers.size(), fused_.module.named_buffers().size());
  for (const auto& b : fused_.module.named_buffers()) {
    EXPECT_TRUE(allClose(b.value, buffers.at(b.name), tolerance_.trained)) << b.name;
  }
  // And in eval mode the trained members answer as they would alone.
  fused_.module.eval();
  torch::NoGradGuard no_grad;
  const auto x = input("x");
  const auto out = firstOutput(fused_.module.forward({x}));
  EXPECT_TRUE(allClose(out, ref_.tensor("eval_outputs"), tolerance_.trained));
  // So does each member split off (hfta::split, what hfta-split writes),
  // with its trained weights and statistics.
  for (int64_t b = 0; b < x.size(0); ++b) {
    auto member = split(fused_.module, b);
    member.eval();
    EXPECT_TRUE(allClose(firstOutput(member.forward({x[b]})), ref_.tensor("eval_outputs")[b], tolerance_.trained))
        << "member " << b << " split off";
  }
}

TEST_P(FusionEquivalence, SharedInputMatchesEachMemberOnTheSameBatch) {
  auto members = loadMembers(memberPaths());
  auto shared = fuse(members, {/*shared_input=*/true});
  shared.module.to(device_);
  const auto x = ref_.tensor("x")[0][0];  // one batch, member-shaped
  const auto out = firstOutput(shared.module.forward({x.to(device_)}));
  ASSERT_EQ(out.size(0), 3);
  for (int b = 0; b < 3; ++b) {
    EXPECT_TRUE(allClose(out[b], firstOutput(members[b].module.forward({x})), tolerance_.forward)) << "member " << b;
  }
}

TEST_P(FusionEquivalence, StateDictNamesAreTheMembersWithStackedShapes) {
  auto member = torch::jit::load(testing::memberPaths(kind_)[0]);
  std::map<std::string, at::Tensor> original;
  for (const auto& p : member.named_parameters()) original[p.name] = p.value;
  for (const auto& b : member.named_buffers()) original[b.name] = b.value;
  size_t seen = 0;
  for (const auto& p : fused_.module.named_parameters()) {
    ASSERT_TRUE(original.count(p.name)) << p.name;
    std::vector<int64_t> expected{3};
    for (auto s : original[p.name].sizes()) expected.push_back(s);
    EXPECT_EQ(p.value.sizes().vec(), expected) << p.name;
    ++seen;
  }
  EXPECT_EQ(seen, member.named_parameters().size());
  EXPECT_EQ(arraySize(fused_.module), 3);
}

// Each family with two sets of member seeds (and data seeds).
INSTANTIATE_TEST_SUITE_P(MlpFamilies, FusionEquivalence,
                         ::testing::Values("mlp", "mlp_seed10", "wide", "wide_seed20", "fallback", "lenet", "resblock",
                                           "resblock_seed30", "pointnet", "generator", "zoo", "lenet_traced",
                                           "generator_traced", "lenet+channels-last-conv",
                                           "resblock+channels-last-conv", "zoo+channels-last-conv",
                                           "mlp+per-member-linear", "wide+per-member-linear"));

// The published CNNs of examples/vision.py at small widths, 3 members.
INSTANTIATE_TEST_SUITE_P(VisionNetworks, FusionEquivalence,
                         ::testing::Values("resnet18", "mobilenet_v2", "pointnet_cls", "pointnet_seg", "dcgan_g",
                                           "dcgan_d", "resnet18+per-member-conv", "mobilenet_v2+per-member-conv",
                                           "pointnet_cls+per-member-conv", "dcgan_d+per-member-conv",
                                           "resnet18+channels-last-conv", "mobilenet_v2+channels-last-conv",
                                           "dcgan_d+channels-last-conv", "resnet18+unfolded-conv",
                                           "dcgan_d+unfolded-conv"));

// The Transformers (tests/python/make_text_models.py): the word LM and BERT
// of examples/text.py, nn.MultiheadAttention and nn.TransformerEncoder
// forms, the activation zoo; after training, eval mode runs PyTorch's fast
// paths (transformer_test.cpp has the other optimizers).
INSTANTIATE_TEST_SUITE_P(Transformers, FusionEquivalence,
                         ::testing::Values("lm_tiny", "lm_tiny_f32", "lm_tiny_tied", "bert_tiny", "bert_tiny_f32",
                                           "mha_weights_padding_causal", "mha_seq_first_padding", "mha_bool_mask",
                                           "mha_seq_first_head_weights", "encoder_post_relu_causal",
                                           "encoder_pre_gelu_padding", "encoder_post_gelu_nested", "activation_zoo",
                                           "lm_tiny+per-member-linear", "bert_tiny+per-member-linear",
                                           "encoder_post_relu_causal+per-member-linear"));

// The recurrent layers (tests/python/make_recurrent_models.py): nn.LSTM,
// GRU, RNN and the cells (recurrent_test.cpp has the rest).
INSTANTIATE_TEST_SUITE_P(Recurrent, FusionEquivalence,
                         ::testing::Values("lstm_lm_tiny", "lstm_stateful", "gru_stateful", "rnn_elman", "rnn_cells",
                                           // a user's List[Tensor] attribute, stacked element by element
                                           "list_attribute", "lstm_lm_tiny+per-member-recurrent",
                                           "lstm_stateful+per-member-recurrent", "gru_stateful+per-member-recurrent",
                                           "rnn_elman+per-member-recurrent", "lstm_stateful+stepped-recurrent",
                                           // stepped, an unprojected LSTM runs runtime/ops/lstm_steps.cpp
                                           "lstm_lm_tiny+stepped-recurrent", "gru_stateful+stepped-recurrent",
                                           "rnn_elman+stepped-recurrent",
                                           // its decoder and log-softmax member by member (linear_log_softmax)
                                           "lstm_lm_tiny+per-member-linear"));

// The rule families of tests/python/rule_models.py, in float64: group and
// instance norm (with running statistics), every upsample mode, 1-D and 3-D
// convolution, pooling and interpolation, expand_as, and stochastic depth
// at p = 0 (a deterministic forward; RandomOps checks p > 0).
INSTANTIATE_TEST_SUITE_P(RuleFamilies, FusionEquivalence,
                         ::testing::Values("encdec", "resample1d", "conv3d", "expand_as", "stochastic_depth",
                                           "encdec+per-member-conv", "encdec+channels-last-conv",
                                           "conv3d+per-member-conv"));

// The families make_test_models.py also writes as torch.export archives
// (hfta.export: both modes), fused from those and held to the same
// reference: forward in both modes, gradients, SGD steps, buffers, split.
INSTANTIATE_TEST_SUITE_P(Exported, FusionEquivalence,
                         ::testing::Values("mlp+exported", "lenet+exported", "pointnet+exported", "resnet18+exported",
                                           "mobilenet_v2+exported", "dcgan_d+exported", "encdec+exported",
                                           "stochastic_depth+exported", "lm_tiny+exported", "lm_tiny_tied+exported",
                                           "bert_tiny+exported", "encoder_pre_gelu_padding+exported",
                                           "lstm_lm_tiny+exported", "resnet18+exported+per-member-conv",
                                           "bert_tiny+exported+per-member-linear"));

// On the GPU (where there is one): a family of each kind of layer, the
// fused kernels (grouped convolution, batched matmul, batch norm over B x C
// channels, the LSTM, attention), the per-member forms (convolution, linear,
// recurrent: cuDNN's LSTM per member, which the autotuner does not pick on
// CUDA yet), the unfolded convolution and FusedSGD's CUDA kernel, against
// PyTorch's answers on the CPU at the same dtype tolerances (float64 sums
// in other orders on the GPU as fused sums do on the CPU).
INSTANTIATE_TEST_SUITE_P(Cuda, FusionEquivalence,
                         ::testing::Values("mlp+cuda", "lenet+cuda", "resblock+cuda", "resnet18+cuda",
                                           "mobilenet_v2+cuda", "pointnet_cls+cuda", "dcgan_g+cuda", "lm_tiny+cuda",
                                           "bert_tiny+cuda", "lstm_lm_tiny+cuda", "encdec+cuda", "conv3d+cuda",
                                           "resnet18+cuda+per-member-conv", "lenet+cuda+channels-last-conv",
                                           "dcgan_d+cuda+unfolded-conv", "bert_tiny+cuda+per-member-linear",
                                           "lstm_lm_tiny+cuda+per-member-recurrent"));

// (and the layer zoo of examples/cnn.py, every other conv/pool/shape form,
// and traced members, whose convolutions are aten::_convolution)
TEST(FusionReport, VisionNetworksFuseWithoutFallback) {
  for (const std::string kind : {"resnet18", "mobilenet_v2", "pointnet_cls", "pointnet_seg", "dcgan_g", "dcgan_d",
                                 "zoo", "lenet_traced", "generator_traced", "encdec", "resample1d", "conv3d",
                                 "expand_as", "stochastic_depth", "stochastic_depth_p25", "random_draws"}) {
    auto fused = fuse(loadMembers(testing::memberPaths(kind)));
    EXPECT_TRUE(fused.report.fallbacks.empty()) << kind << ":\n" << fused.report.text();
  }
}

// Convolutional values stay channel-folded from the first convolution to
// the pooled features: one conversion in, one out (none in with a shared
// input, which the first convolution reads as it is).
TEST(FusionReport, ResNetAndMobileNetConvertLayoutsOnlyAtTheEnds) {
  for (const std::string kind : {"resnet18", "mobilenet_v2"}) {
    auto members = loadMembers(testing::memberPaths(kind));
    EXPECT_EQ(fuse(members).report.layout_conversions, 2) << kind;
    EXPECT_EQ(fuse(members, {/*shared_input=*/true}).report.layout_conversions, 1) << kind;
  }
}

TEST(FusionReport, MlpFamiliesFuseWithoutFallbackAndCumsumFallsBack) {
  for (const std::string kind : {"mlp", "wide"}) {
    auto fused = fuse(loadMembers(testing::memberPaths(kind)));
    EXPECT_TRUE(fused.report.fallbacks.empty()) << kind << ":\n" << fused.report.text();
    EXPECT_FALSE(fused.report.fused.empty());
  }
  auto fused = fuse(loadMembers(testing::memberPaths("fallback")));
  ASSERT_EQ(fused.report.fallbacks.size(), 1u) << fused.report.text();
  EXPECT_EQ(fused.report.fallbacks[0].node, "aten::cumsum");
  EXPECT_NE(fused.report.fallbacks[0].detail.find("no fusion rule"), std::string::npos);
  EXPECT_NE(fused.report.fallbacks[0].source.find("mlp.py:"), std::string::npos);
}

// With the graph executor not optimizing (torch::jit::setGraphExecutorOptimize
// (false), a C++ program's choice), callees' graphs come uninlined: fusion
// still inlines every level, and the fused module runs on that executor.
TEST(SimpleExecutor, FusesEveryLevelAndRuns) {
  struct RestoreOptimize {
    bool was = torch::jit::getGraphExecutorOptimize();
    ~RestoreOptimize() { torch::jit::setGraphExecutorOptimize(was); }
  } restore;
  torch::jit::setGraphExecutorOptimize(false);
  for (const std::string kind : {"lenet", "resnet18"}) {
    Reference ref(kind + "_reference.pt");
    auto fused = fuse(loadMembers(testing::memberPaths(kind)));
    EXPECT_TRUE(fused.report.fallbacks.empty()) << kind << ":\n" << fused.report.text();
    const auto out = firstOutput(fused.module.forward({ref.tensor("x")[0]}));
    EXPECT_TRUE(allClose(out, ref.tensor("outputs"), testing::tolerancesFor(out.scalar_type()).forward)) << kind;
  }
}

TEST(DivergingMember, LeavesTheOtherMembersUnchanged) {
  Reference ref("mlp_diverging_reference.pt");
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  trainFused(fused.module, ref);
  const auto trained = ref.tensors("trained");
  for (const auto& p : fused.module.named_parameters()) {
    const auto expected = trained.at(p.name);
    EXPECT_FALSE(expected[1].isfinite().all().item<bool>()) << "member 1 should diverge alone too";
    EXPECT_FALSE(p.value[1].isfinite().all().item<bool>()) << p.name;
    for (int b : {0, 2}) {
      EXPECT_TRUE(allClose(p.value[b], expected[b], testing::kTrainedTolerance)) << p.name << " member " << b;
    }
  }
}

// Three identical members (one seed, dropout 0.5) on one shared batch: any
// difference between their outputs comes from their own dropout masks
// (element-wise Dropout in the MLP, channel-wise Dropout2d in LeNet).
class Dropout : public ::testing::TestWithParam<std::pair<std::string, std::vector<int64_t>>> {};

TEST_P(Dropout, EachMemberDrawsItsOwnMaskAndEvalTurnsItOff) {
  const auto& [family, input_shape] = GetParam();
  auto members = loadMembers(testing::memberPaths(family));
  auto fused = fuse(members, {/*shared_input=*/true});
  const auto x = torch::randn(input_shape);
  // Eval first: a training forward would move LeNet's batch-norm statistics.
  fused.module.eval();
  const auto z = fused.module.forward({x}).toTensor();
  members[0].module.eval();
  const auto expected = members[0].module.forward({x}).toTensor();
  for (int b = 0; b < 3; ++b) EXPECT_TRUE(allClose(z[b], expected, testing::kForwardTolerance)) << b;
  fused.module.train();
  const auto y = fused.module.forward({x}).toTensor();
  EXPECT_FALSE(at::allclose(y[0], y[1]));
  EXPECT_FALSE(at::allclose(y[1], y[2]));
}

INSTANTIATE_TEST_SUITE_P(ElementAndChannel, Dropout,
                         ::testing::Values(std::make_pair(std::string("dropout"), std::vector<int64_t>{64, 4, 4}),
                                           std::make_pair(std::string("lenet_dropout"),
                                                          std::vector<int64_t>{16, 1, 16, 16})));

// Random ops draw each member's own numbers with the member's statistics.
// A sample mean of n independent draws with standard deviation sd lies
// within kSigmas * sd / sqrt(n) of its expectation except with probability
// 5.7e-7 (the normal tail beyond 5 sigma, which the binomial and uniform
// means of these sample sizes follow closely): a wrong rate or scale of a
// few percent fails, chance does not (and the seed is fixed).
constexpr double kSigmas = 5;

void expectMean(const at::Tensor& draws, double mean, double sd, const std::string& what) {
  const double n = static_cast<double>(draws.numel());
  EXPECT_NEAR(draws.mean().item<double>(), mean, kSigmas * sd / std::sqrt(n)) << what;
}

// The sample variance of n draws with variance var and fourth central
// moment mu4 has standard deviation sqrt((mu4 - var^2) / n).
void expectVariance(const at::Tensor& draws, double var, double mu4, const std::string& what) {
  const double n = static_cast<double>(draws.numel());
  EXPECT_NEAR(draws.var().item<double>(), var, kSigmas * std::sqrt((mu4 - var * var) / n)) << what;
}

// Every element is 0 or 1.
bool zeroOrOne(const at::Tensor& t) { return (t == 0).logical_or(t == 1).all().item<bool>(); }

// rule_models.RandomDraws (3 members of one architecture, stochastic depth
// at p = 0.25) on a shared batch of ones, whose outputs are its draws.
class RandomOps : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(26);
    fused_ = fuse(loadMembers(testing::memberPaths("random_draws")), {/*shared_input=*/true});
    ASSERT_TRUE(fused_.report.fallbacks.empty()) << fused_.report.text();
  }
  std::vector<at::Tensor> draw(const at::Tensor& x) {
    std::vector<at::Tensor> outputs;
    const auto tuple = fused_.module.forward({x});
    for (const auto& out : tuple.toTupleRef().elements()) outputs.push_back(out.toTensor());
    return outputs;
  }
  static constexpr double kSurvival = 0.75;  // 1 - p
  static constexpr int64_t kMembers = 3;
  FusionResult fused_;
};

// Row mode: one number per sample and member; batch mode: one per member
// for its whole batch. Kept samples are scaled by 1 / (1 - p).
TEST_F(RandomOps, StochasticDepthDrawsPerSampleOrPerBatchForEachMember) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kCalls = 2000, kBatch = 16;
  const auto x = torch::ones({kBatch, 1, 1, 17}, torch::kDouble);
  std::vector<at::Tensor> rows, batches;
  for (int64_t call = 0; call < kCalls; ++call) {
    const auto out = draw(x);
    for (const auto& [t, kept] : {std::pair{out[0], &rows}, std::pair{out[1], &batches}}) {
      ASSERT_EQ(t.sizes(), (std::vector<int64_t>{kMembers, kBatch, 1, 1, 17}));
      // Dropped samples are 0, kept ones 1 / (1 - p) (up to the rounding
      // of that division: a few units in the last place).
      const auto survived = (t * kSurvival).round();
      ASSERT_TRUE(zeroOrOne(survived));
      ASSERT_TRUE(allClose(t, survived / kSurvival, 1e-14));
      kept->push_back(survived);
    }
  }
  const auto row = torch::stack(rows);  // [calls, B, N, 1, 1, 17]
  const auto batch = torch::stack(batches);
  // One draw per (call, member, sample) in row mode, per (call, member) in
  // batch mode: every element of it holds the same.
  EXPECT_TRUE(row.eq(row.narrow(5, 0, 1)).all().item<bool>());
  EXPECT_TRUE(batch.eq(batch.narrow(2, 0, 1).narrow(5, 0, 1)).all().item<bool>());
  const auto row_draws = row.select(5, 0).flatten(2);                   // [calls, B, N]
  const auto batch_draws = batch.select(2, 0).flatten(2).select(2, 0);  // [calls, B]
  const double sd = std::sqrt(kSurvival * (1 - kSurvival));
  for (int64_t b = 0; b < kMembers; ++b) {
    expectMean(row_draws.select(1, b), kSurvival, sd, "row-mode survival rate of member " + std::to_string(b));
    expectMean(batch_draws.select(1, b), kSurvival, sd, "batch-mode survival rate of member " + std::to_string(b));
  }
  // Members draw independently: two disagree with probability 2 s (1 - s)
  // (0 if they shared their draws).
  const double disagree = 2 * kSurvival * (1 - kSurvival);
  const double disagree_sd = std::sqrt(disagree * (1 - disagree));
  for (int64_t b = 0; b + 1 < kMembers; ++b) {
    expectMean(row_draws.select(1, b).ne(row_draws.select(1, b + 1)).to(torch::kDouble), disagree, disagree_sd,
               "row-mode draws of members " + std::to_string(b) + " and " + std::to_string(b + 1));
    expectMean(batch_draws.select(1, b).ne(batch_draws.select(1, b + 1)).to(torch::kDouble), disagree, disagree_sd,
               "batch-mode draws of members " + std::to_string(b) + " and " + std::to_string(b + 1));
  }
}

// Dropout at p = 0.25 on ones: a kept element is 1 / (1 - p), and each
// member keeps a fraction 1 - p, element by element (F.dropout) or a whole
// channel plane of a sample at a time (F.dropout2d), with masks of its own.
TEST_F(RandomOps, DropoutKeepsEachMembersRateAndScale) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kCalls = 20;
  const auto x = torch::ones({64, 2, 4, 17}, torch::kDouble);
  std::vector<at::Tensor> elements, planes;
  for (int64_t call = 0; call < kCalls; ++call) {
    const auto out = draw(x);
    ASSERT_EQ(out.size(), 11u);
    for (const auto& [t, kept] : {std::pair{out[9], &elements}, std::pair{out[10], &planes}}) {
      const auto survived = (t * kSurvival).round();
      ASSERT_TRUE(zeroOrOne(survived));
      ASSERT_TRUE(allClose(t, survived / kSurvival, 1e-14));  // the scale, to rounding
      kept->push_back(survived);
    }
  }
  const auto element = torch::stack(elements);  // [calls, B, N, C, H, W]
  const auto plane = torch::stack(planes);
  // dropout2d: one draw per (call, member, sample, channel).
  EXPECT_TRUE(plane.eq(plane.narrow(4, 0, 1).narrow(5, 0, 1)).all().item<bool>());
  const auto plane_draws = plane.select(5, 0).select(4, 0);  // [calls, B, N, C]
  const double sd = std::sqrt(kSurvival * (1 - kSurvival));
  for (int64_t b = 0; b < kMembers; ++b) {
    const auto member = " of member " + std::to_string(b);
    expectMean(element.select(1, b), kSurvival, sd, "dropout's survival rate" + member);
    expectMean(plane_draws.select(1, b), kSurvival, sd, "dropout2d's survival rate" + member);
  }
  // Members draw independently: two disagree with probability 2 s (1 - s).
  const double disagree = 2 * kSurvival * (1 - kSurvival);
  for (int64_t b = 0; b + 1 < kMembers; ++b) {
    expectMean(element.select(1, b).ne(element.select(1, b + 1)).to(torch::kDouble), disagree,
               std::sqrt(disagree * (1 - disagree)), "dropout masks of members " + std::to_string(b) + " and next");
  }
}

// Element-wise draws: rand_like, randn_like, bernoulli, and the in-place
// fills of a fresh shared tensor (bernoulli_ with a float and with a tensor
// probability, normal_) and of a per-member one (uniform_).
TEST_F(RandomOps, ElementwiseDrawsHaveTheirDistributionsAndDifferPerMember) {
  torch::NoGradGuard no_grad;
  const auto x = torch::ones({64, 2, 4, 17}, torch::kDouble);
  const auto out = draw(x);
  ASSERT_EQ(out.size(), 11u);
  for (size_t i = 2; i < out.size(); ++i) {
    ASSERT_EQ(out[i].sizes(), (std::vector<int64_t>{kMembers, 64, 2, 4, 17})) << "output " << i;
    for (int64_t b = 0; b + 1 < kMembers; ++b) {
      EXPECT_FALSE(out[i][b].equal(out[i][b + 1])) << "output " << i << ": members " << b << " and " << b + 1;
    }
  }
  const auto &uniform = out[2], &normal = out[3], &bernoulli = out[4], &filled = out[5], &filled_tensor_p = out[6],
             &normal_fill = out[7], &uniform_fill = out[8];
  for (int64_t b = 0; b < kMembers; ++b) {
    const auto member = " of member " + std::to_string(b);
    // U(0, 1): variance 1/12, fourth central moment 1/80.
    EXPECT_TRUE(uniform[b].ge(0).logical_and(uniform[b].lt(1)).all().item<bool>());
    expectMean(uniform[b], 0.5, std::sqrt(1.0 / 12), "rand_like" + member);
    expectVariance(uniform[b], 1.0 / 12, 1.0 / 80, "rand_like" + member);
    // N(0, 1): fourth central moment 3.
    expectMean(normal[b], 0, 1, "randn_like" + member);
    expectVariance(normal[b], 1, 3, "randn_like" + member);
    for (const auto& [draws, p, what] : {std::tuple{bernoulli, 0.3, "bernoulli"}, std::tuple{filled, 0.3, "bernoulli_"},
                                         std::tuple{filled_tensor_p, 0.6, "bernoulli_ (tensor p)"}}) {
      EXPECT_TRUE(zeroOrOne(draws[b])) << what << member;
      expectMean(draws[b], p, std::sqrt(p * (1 - p)), what + member);
    }
    // N(2, 3^2): variance 9, fourth central moment 3 * 81.
    expectMean(normal_fill[b], 2, 3, "normal_" + member);
    expectVariance(normal_fill[b], 9, 3 * 81, "normal_" + member);
    // U(-1, 1): variance 1/3, fourth central moment 1/5.
    EXPECT_TRUE(uniform_fill[b].ge(-1).logical_and(uniform_fill[b].lt(1)).all().item<bool>());
    expectMean(uniform_fill[b], 0, std::sqrt(1.0 / 3), "uniform_" + member);
    expectVariance(uniform_fill[b], 1.0 / 3, 1.0 / 5, "uniform_" + member);
  }
}

// In eval mode stochastic depth passes its input through: the p = 0.25
// network then answers as each member alone; in training mode it draws.
TEST(StochasticDepth, EvalMatchesEachMemberAloneAndTrainingDraws) {
  torch::manual_seed(26);
  auto members = loadMembers(testing::memberPaths("stochastic_depth_p25"));
  auto fused = fuse(members);
  const auto x = torch::randn({3, 8, 3, 17, 17}, torch::kDouble);
  torch::NoGradGuard no_grad;
  fused.module.eval();
  const auto out = fused.module.forward({x}).toTensor();
  for (int64_t b = 0; b < 3; ++b) {
    members[b].module.eval();
    // float64, and the member's own arithmetic up to the grouped
    // convolution's summation order: the suite's forward tolerance.
    EXPECT_TRUE(allClose(out[b], members[b].module.forward({x[b]}).toTensor(), testing::kFloat64.forward)) << b;
  }
  fused.module.train();
  const auto a = fused.module.forward({x}).toTensor();
  const auto again = fused.module.forward({x}).toTensor();
  EXPECT_FALSE(a.equal(again)) << "training mode draws new noise each call";
}

}  // namespace
}  // namespace hfta
