// Segment plans (passes/fuse/segment_plans.h, runtime/ops/segment_plan.h):
// where the fused graph is cut, which segments may run on the members' own
// ops and why not, and the runtime's race between plans: the fastest mix
// wins, is kept on disk, and racing changes nothing training computes.
// (Each plan against PyTorch: ctest's fusion_plan_members and
// fusion_heuristic_forms run the equivalence suites with one plan.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "hfta/hfta.h"
#include "passes/fuse/graph_fuser.h"
#include "passes/ir/walk.h"
#include "runtime/ops/autotune.h"
#include "runtime/ops/op_kinds.h"
#include "runtime/ops/segment_plan.h"
#include "support/atomic_file.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

int64_t countPlanOps(torch::jit::Block* block) {
  int64_t count = 0;
  forEachNode(block, [&](const torch::jit::Node* node) { count += node->kind() == kind::segment_plan(); });
  return count;
}

// The member graph `ir` (one input, a stacked [B, ...] tensor) fused for 2
// members with segment plans; `report` gets its segments.
std::shared_ptr<torch::jit::Graph> fuseTwoWithPlans(const char* ir, FusionReport& report) {
  torch::jit::Graph member;
  torch::jit::parseIR(ir, &member);
  return fuseMemberGraph(member, 2, {ValueKind::Array}, report, /*segment_plans=*/true);
}

class SegmentPlans : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hfta_segment_plans_{}", ::getpid());
    autotune::setCachePath((dir_ / "forms.json").string());
    autotune::setEnabled(true);
    segment_plan::forget();
  }
  void TearDown() override {
    segment_plan::forget();
    autotune::setCachePath("");
    removeTree(dir_.string());
  }
  fs::path dir_;
  testing::SegmentPlanScope raced_{std::nullopt};  // none forced, whatever HFTA_SEGMENT_PLAN says
};

// The MLP (examples/mlp.py: fc1, relu, dropout, fc2, gelu, fc3) is cut
// between layers; the segment with the dropout runs fused (the members
// would draw other numbers), the others choose.
TEST_F(SegmentPlans, TheMlpIsCutBetweenLayersAndItsSegmentsChoose) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  const auto& segments = fused.report.segments;
  ASSERT_GE(segments.size(), 3u);
  int64_t choosing = 0;
  for (const auto& s : segments) {
    if (s.plans == "fused | members") {
      ++choosing;
    } else {
      EXPECT_NE(s.plans.find("aten::dropout"), std::string::npos) << s.plans;
      EXPECT_NE(s.plans.find("draws random numbers"), std::string::npos) << s.plans;
    }
  }
  EXPECT_GE(choosing, 2);
  auto graph = fused.module.get_method("forward").graph();
  EXPECT_EQ(countPlanOps(graph->block()), choosing);
  EXPECT_NE(fused.report.text().find("fused | members"), std::string::npos);

  FuseOptions off;
  off.segment_plans = false;
  auto plain = fuse(loadMembers(testing::memberPaths("mlp")), off);
  EXPECT_TRUE(plain.report.segments.empty());
  EXPECT_EQ(countPlanOps(plain.module.get_method("forward").graph()->block()), 0);
}

// A segment that writes the model's input in place: the members, which
// write copies of their slices, cannot stand in for the fused plan, which
// writes the caller's tensor. The next segment still chooses.
TEST_F(SegmentPlans, ASegmentWritingTheModelsInputRunsFusedAndSaysWhy) {
  FusionReport report;
  auto fused = fuseTwoWithPlans(R"IR(
graph(%x : Tensor):
  %r : Tensor = aten::relu_(%x)
  %s : Tensor = aten::sin(%r)
  return (%s)
)IR",
                                report);
  // relu_ and sin each do work: two segments, the second free to choose.
  ASSERT_EQ(report.segments.size(), 2u);
  EXPECT_NE(report.segments[0].plans.find("fused: it writes `x` in place, which is an input of the model"),
            std::string::npos)
      << report.segments[0].plans;
  EXPECT_EQ(report.segments[1].plans, "fused | members");
  EXPECT_EQ(countPlanOps(fused->block()), 1);
}

// A dropout draws random numbers, and keeps its segment fused, unless its
// probability is a constant 0 (ATen then returns the input undrawn).
TEST_F(SegmentPlans, OnlyADropoutThatDrawsKeepsItsSegmentFused) {
  FusionReport report;
  auto fused = fuseTwoWithPlans(R"IR(
graph(%x : Tensor):
  %none : float = prim::Constant[value=0.]()
  %half : float = prim::Constant[value=0.5]()
  %train : bool = prim::Constant[value=1]()
  %a : Tensor = aten::dropout(%x, %none, %train)
  %b : Tensor = aten::sin(%a)
  %c : Tensor = aten::dropout(%b, %half, %train)
  return (%c)
)IR",
                                report);
  ASSERT_EQ(report.segments.size(), 3u);
  EXPECT_EQ(report.segments[0].plans, "fused | members");
  EXPECT_EQ(report.segments[1].plans, "fused | members");
  EXPECT_NE(report.segments[2].plans.find("draws random numbers"), std::string::npos) << report.segments[2].plans;
  EXPECT_EQ(countPlanOps(fused->block()), 2);
}

// The same for a recurrent layer's dropout between its layers (nn.GRU's and
// nn.RNN's `dropout`, a TorchScript constant): 0 draws nothing, 0.5 draws.
TEST_F(SegmentPlans, ARecurrentLayerDrawsOnlyWithDropoutBetweenLayers) {
  auto draws = [](const FusionReport& report) {
    return std::any_of(report.segments.begin(), report.segments.end(),
                       [](const auto& s) { return s.plans.find("draws random numbers") != std::string::npos; });
  };
  for (const char* kind : {"gru_stateful", "rnn_elman"}) {
    EXPECT_FALSE(draws(fuse(loadMembers(testing::memberPaths(kind))).report)) << kind;
  }
  EXPECT_TRUE(draws(fuse(loadMembers(testing::memberPaths("lstm_dropout"))).report));
}

// The race over synthetic times: segment 0 is faster fused, segment 1 on
// the members; from fused everywhere the race tries the members
// everywhere, then flips each segment, and ends on "FM". Every challenger
// is timed beside the best so far, in one comparison, never against a
// median taken earlier.
TEST_F(SegmentPlans, TheRaceEndsOnTheFastestMix) {
  auto seconds = [](const std::string& plans) { return (plans[0] == 'F' ? 1.0 : 2.0) + (plans[1] == 'M' ? 1.0 : 2.0); };
  std::vector<std::vector<std::string>> compared;
  auto compare = [&](const std::vector<std::string>& mixes) {
    compared.push_back(mixes);
    std::vector<double> medians;
    for (const auto& plans : mixes) medians.push_back(seconds(plans));
    return medians;
  };
  segment_plan::Trials trials;
  EXPECT_EQ(segment_plan::race(2, compare, trials), "FM");
  const std::vector<std::vector<std::string>> expected{{"FF", "MM"}, {"FF", "MF"}, {"FF", "FM"}};
  EXPECT_EQ(compared, expected);  // a tie (MM) keeps the fused plan
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[0], std::make_pair(std::string("FF"), 3.0));
  EXPECT_EQ(trials[1], std::make_pair(std::string("MM"), 3.0));
  EXPECT_EQ(trials[5], std::make_pair(std::string("FM"), 2.0));
  // What wins is decided within a comparison: here the machine slows down
  // as the race goes on (each comparison's times 10x the one before), so
  // that MM's median beats FM's taken later, yet FM wins beside MM.
  double slowdown = 1;
  auto slowing = [&](const std::vector<std::string>& mixes) {
    slowdown *= 10;
    std::vector<double> medians;
    for (const auto& plans : mixes) medians.push_back(slowdown * seconds(plans) * (plans == "MM" ? 0.9 : 1.0));
    return medians;
  };
  trials.clear();
  EXPECT_EQ(segment_plan::race(2, slowing, trials), "FM");
  // A mix that fails (negative time) is never chosen.
  trials.clear();
  EXPECT_EQ(segment_plan::race(
                1,
                [](const std::vector<std::string>&) {
                  return std::vector<double>{5.0, -1.0};
                },
                trials),
            "F");
}

TEST_F(SegmentPlans, WithoutMeasurementOrForcedEveryCallTakesThatPlan) {
  autotune::setEnabled(false);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(segment_plan::useFused("g", i % 2, 2, c10::IValue(), {}));
  autotune::setEnabled(true);
  segment_plan::setForced(segment_plan::Plan::Members);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(segment_plan::useFused("g", i % 2, 2, c10::IValue(), {}));
}

// Through a fused module: its first call races the plans on a copy and
// keeps the winner, and training computes exactly what it computes when
// the plans come from the cache with no race at all (the race restores the
// random state, writes nothing of the module's, reaches no gradient).
TEST_F(SegmentPlans, TheFirstCallRacesOnACopyAndLeavesTrainingAsItWas) {
  const auto x = torch::randn({3, 32, 16});
  auto train = [&] {
    auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
    fused.module.train();
    torch::manual_seed(7);
    std::vector<at::Tensor> results;
    for (int step = 0; step < 3; ++step) {
      auto out = fused.module.forward({x}).toTensor();
      out.sum().backward();
      results.push_back(out.detach().clone());
    }
    for (const auto& p : fused.module.parameters()) results.push_back(p.grad().clone());
    for (const auto& b : fused.module.buffers()) results.push_back(b.clone());
    return std::make_pair(fused.report, results);
  };
  const auto [report, raced] = train();
  const auto decisions = segment_plan::decisions(report.plan_graph);
  ASSERT_EQ(decisions.size(), 1u);
  const auto choosing = static_cast<size_t>(std::count_if(report.segments.begin(), report.segments.end(),
                                                          [](const auto& s) { return s.plans == "fused | members"; }));
  EXPECT_EQ(decisions[0].plans.size(), choosing);
  // Both everywhere, then each segment flipped (a mix tried already is not
  // timed again), each comparison two trials: the best so far, then its
  // challenger.
  EXPECT_LE(decisions[0].trials.size(), 2 * (choosing + 1));
  EXPECT_GE(decisions[0].trials.size(), 2u);
  EXPECT_EQ(decisions[0].trials.size() % 2, 0u);

  segment_plan::forget();  // as a new process: the plans come from forms.json
  const auto [again, cached] = train();
  ASSERT_EQ(raced.size(), cached.size());
  for (size_t i = 0; i < raced.size(); ++i) EXPECT_TRUE(raced[i].equal(cached[i])) << "result " << i;
}

}  // namespace
}  // namespace hfta
