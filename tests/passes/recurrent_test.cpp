// Recurrent layers fused (tests/python/make_recurrent_models.py): nn.LSTM,
// nn.GRU, nn.RNN and their cells run all members at each time step, with no
// fallback. FusionEquivalence checks the first output, gradients and SGD
// steps against PyTorch; here every output (h_n, c_n included), eval mode,
// split members, dropout between layers and packed sequences.
#include <gtest/gtest.h>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "runtime/optim/optimizers.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

using testing::allClose;

constexpr int64_t kMembers = 3;

// The tensor leaves of an output (a tensor, or tuples of them), in order.
void leaves(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const auto& element : value.toTupleRef().elements()) leaves(element, out);
  }
}

std::vector<at::Tensor> leavesOf(const c10::IValue& value) {
  std::vector<at::Tensor> out;
  leaves(value, out);
  return out;
}

// Every leaf of the fused output, member b's slice, against member b alone.
void expectSameOutputs(torch::jit::Module& fused, std::vector<Member>& members, const at::Tensor& x,
                       const std::string& what) {
  const auto fused_out = leavesOf(fused.forward({x}));
  for (int64_t b = 0; b < kMembers; ++b) {
    const auto alone = leavesOf(members[b].module.forward({x[b]}));
    ASSERT_EQ(fused_out.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      // float64: one rounding of another summation order per GEMM, and the
      // recurrence over a few steps carries it (1e-10 as the other suites).
      EXPECT_TRUE(allClose(fused_out[i][b], alone[i], testing::tolerancesFor(at::kDouble).forward))
          << what << ": output " << i << " member " << b;
    }
  }
}

// A kind with the suffix "+per-member-recurrent" or "+stepped-recurrent"
// runs its recurrent layers in that form (testing::FormScope).
class RecurrentFamily : public ::testing::TestWithParam<std::string> {
 protected:
  std::string kind_ = GetParam();
  testing::FormScope forms_{kind_};
  testing::Reference ref_{kind_ + "_reference.pt"};
  std::vector<Member> members_ = loadMembers(testing::memberPaths(kind_));
  FusionResult fused_ = fuse(members_);
};

TEST_P(RecurrentFamily, FusesEveryRecurrentOpWithoutFallback) {
  EXPECT_TRUE(fused_.report.fallbacks.empty()) << fused_.report.text();
  const bool recurrent = std::any_of(fused_.report.fused.begin(), fused_.report.fused.end(),
                                     [](const FusionReport::Entry& e) { return e.detail == "recurrent"; });
  EXPECT_TRUE(recurrent) << fused_.report.text();
}

TEST_P(RecurrentFamily, EveryOutputMatchesEachMemberInTrainingAndEval) {
  const auto x = ref_.tensor("x")[0];
  torch::NoGradGuard no_grad;
  expectSameOutputs(fused_.module, members_, x, "train");
  fused_.module.eval();
  for (auto& m : members_) m.module.eval();
  expectSameOutputs(fused_.module, members_, x, "eval");
}

// After SGD steps on the fused array, a member split out answers as the
// array's slice and holds the array's weights.
TEST_P(RecurrentFamily, SplitMembersCarryTheTrainedWeights) {
  const auto xs = ref_.tensor("x");
  optim::SGDOptions options;
  options.lr = std::vector<double>{0.01, 0.02, 0.03};
  optim::FusedSGD sgd(distinctParameters(fused_.module), kMembers, options);
  for (int64_t step = 0; step < 3; ++step) {
    sgd.zero_grad();
    leavesOf(fused_.module.forward({xs[step]}))[0].pow(2).sum().backward();
    sgd.step();
  }
  torch::NoGradGuard no_grad;
  const auto fused_out = leavesOf(fused_.module.forward({xs[0]}))[0];
  for (int64_t b = 0; b < kMembers; ++b) {
    auto member = split(fused_.module, b);
    const auto stacked = tensorSlots(fused_.module);
    for (const auto& slot : tensorSlots(member)) {
      const auto it = std::find_if(stacked.begin(), stacked.end(), [&](const auto& s) { return s.name == slot.name; });
      ASSERT_NE(it, stacked.end()) << slot.name;
      EXPECT_TRUE(allClose(slot.tensor, it->tensor[b], 0)) << slot.name << " member " << b;
    }
    EXPECT_TRUE(
        allClose(leavesOf(member.forward({xs[0][b]}))[0], fused_out[b], testing::tolerancesFor(at::kDouble).forward))
        << "member " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, RecurrentFamily,
                         ::testing::Values("lstm_lm_tiny", "lstm_stateful", "gru_stateful", "rnn_elman", "rnn_cells",
                                           "lstm_lm_tiny+per-member-recurrent", "lstm_stateful+per-member-recurrent",
                                           "gru_stateful+per-member-recurrent", "rnn_elman+per-member-recurrent",
                                           "lstm_stateful+stepped-recurrent", "gru_stateful+stepped-recurrent",
                                           "rnn_elman+stepped-recurrent"));

// Identical members (one seed) with dropout 0.5 before, between and after
// the LSTM's layers: in training each member draws its own masks; in eval
// they answer alike.
TEST(RecurrentDropout, EachMemberDrawsItsOwnMasksBetweenLayers) {
  auto fused = fuse(loadMembers(testing::memberPaths("lstm_dropout")));
  EXPECT_TRUE(fused.report.fallbacks.empty()) << fused.report.text();
  const auto tokens = at::randint(0, 40, {4, 8}, at::kLong);
  const auto shared = tokens.unsqueeze(0).expand({kMembers, 4, 8});
  torch::NoGradGuard no_grad;
  const auto train = fused.module.forward({shared}).toTensor();
  for (int64_t b = 1; b < kMembers; ++b) EXPECT_FALSE(at::allclose(train[0], train[b])) << "member " << b;
  fused.module.eval();
  const auto eval = fused.module.forward({shared}).toTensor();
  for (int64_t b = 1; b < kMembers; ++b) EXPECT_TRUE(allClose(eval[b], eval[0], 0)) << "member " << b;
}

// The same seed gives the same masks in both forms: dropout between
// layers draws once over the stacked layer output in each, so the form the
// race picks changes no random number (and training stays reproducible).
TEST(RecurrentDropout, BothFormsDrawTheSameMasks) {
  auto fused = fuse(loadMembers(testing::memberPaths("lstm_dropout")));
  const auto tokens = at::randint(0, 40, {kMembers, 4, 8}, at::kLong);
  auto run = [&](ops::RecurrentForm form, uint64_t seed) {
    testing::FormScope forms{ops::ConvForm::Chosen, ops::LinearForm::Chosen};  // puts the recurrent form back
    ops::setRecurrentForm(form);
    torch::manual_seed(seed);
    torch::NoGradGuard no_grad;
    return fused.module.forward({tokens}).toTensor();
  };
  const auto stepped = run(ops::RecurrentForm::Stepped, 7), per_member = run(ops::RecurrentForm::PerMember, 7);
  // Another summation order per GEMM (batched against ATen's per member),
  // in float64 over a few steps: 1e-10 as the other suites. Different masks
  // would differ by O(1).
  EXPECT_TRUE(allClose(stepped, per_member, testing::tolerancesFor(at::kDouble).forward));
  EXPECT_FALSE(allClose(run(ops::RecurrentForm::PerMember, 8), per_member, testing::tolerancesFor(at::kDouble).forward))
      << "another seed must draw other masks, or this test checks nothing";
}

// Packed sequences whose lengths differ per member run per member
// (aten::lstm.data has no rule), and match each member alone.
TEST(RecurrentPacked, RunsPerMemberAndMatches) {
  auto members = loadMembers(testing::memberPaths("lstm_packed"));
  auto fused = fuse(members);
  EXPECT_FALSE(fused.report.fallbacks.empty()) << fused.report.text();
  auto x = at::randn({kMembers, 4, 6, 17}, at::kDouble);
  x.index_put_({0, 1, at::indexing::Slice(3)}, -2.0);  // member 0's second sequence: 3 steps
  x.index_put_({2, 0, at::indexing::Slice(1)}, -2.0);  // member 2's first: 1 step
  {
    torch::NoGradGuard no_grad;
    expectSameOutputs(fused.module, members, x, "packed");
  }
  // Gradients of each member's sum of squares: its own.
  fused.module.forward({x}).toTensor().pow(2).sum().backward();
  for (int64_t b = 0; b < kMembers; ++b) {
    members[b].module.forward({x[b]}).toTensor().pow(2).sum().backward();
    for (const auto& p : distinctNamedParameters(members[b].module)) {
      const auto stacked = fused.module.attr("lstm").toModule().attr(p.name.substr(p.name.find('.') + 1)).toTensor();
      EXPECT_TRUE(allClose(stacked.grad()[b], p.value.grad(), testing::tolerancesFor(at::kDouble).gradient))
          << p.name << " member " << b;
    }
  }
}

}  // namespace
}  // namespace hfta
