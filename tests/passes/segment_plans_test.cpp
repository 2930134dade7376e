// Segment plans (passes/fuse/segment_plans.h, runtime/ops/segment_plan.h):
// where the fused graph is cut, which segments may run on the members' own
// ops and why not, and the runtime's race between plans: the faster plan
// of each segment wins, is kept on disk, and every plan trains as the
// fused plan does. (Each plan against PyTorch: ctest's fusion_plan_members
// and fusion_heuristic_forms run the equivalence suites with one plan.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/torch.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

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

class SegmentPlans : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hfta_segment_plans_{}", ::getpid());
    autotune::setCachePath((dir_ / "forms.json").string());
    autotune::setEnabled(true);
    segment_plan::forget();
    forced_ = segment_plan::forced();
    segment_plan::setForced(std::nullopt);
  }
  void TearDown() override {
    segment_plan::setForced(forced_);
    segment_plan::forget();
    autotune::setCachePath("");
    removeTree(dir_.string());
  }
  fs::path dir_;
  std::optional<segment_plan::Plan> forced_;
};

TEST_F(SegmentPlans, TheMlpIsCutBetweenLayersAndEverySegmentHasBothPlans) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  const auto& segments = fused.report.segments;
  ASSERT_GE(segments.size(), 2u);
  for (const auto& s : segments) EXPECT_EQ(s.plans, "fused | members") << s.first_source;
  auto graph = fused.module.get_method("forward").graph();
  EXPECT_EQ(countPlanOps(graph->block()), static_cast<int64_t>(segments.size()));
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
  auto member = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %r : Tensor = aten::relu_(%x)
  %s : Tensor = aten::sin(%r)
  return (%s)
)IR",
                      member.get());
  FusionReport report;
  auto fused = fuseMemberGraph(*member, 2, {ValueKind::Array}, report, /*segment_plans=*/true);
  // relu_ and sin each do work: two segments, the second free to choose.
  ASSERT_EQ(report.segments.size(), 2u);
  EXPECT_NE(report.segments[0].plans.find("fused: it writes `x` in place, which is an input of the model"),
            std::string::npos)
      << report.segments[0].plans;
  EXPECT_EQ(report.segments[1].plans, "fused | members");
  EXPECT_EQ(countPlanOps(fused->block()), 1);
}

// The race: a step's time depends on the plans (here, sleeps the plans
// choose), and the tuner ends on the fastest mix, which the cache then
// gives a fresh process (a forgotten state) at once.
TEST_F(SegmentPlans, TheFastestMixWinsAndIsKept) {
  const std::string graph = "test-graph";
  const auto input = torch::zeros({2, 4, 3});
  std::string last;
  auto step = [&] {
    const bool first = segment_plan::useFused(graph, 0, 2, {input});
    const bool second = segment_plan::useFused(graph, 1, 2, {});
    last = fmt::format("{}{}", first ? 'F' : 'M', second ? 'F' : 'M');
    // Segment 0 is faster fused, segment 1 on the members: "FM" is the
    // fastest step by 10 ms against any other (sleeps, not arithmetic, so
    // a busy machine adds to every step alike).
    const int ms = (first ? 0 : 10) + (second ? 10 : 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  for (int i = 0; i < 100 && segment_plan::decisions(graph).empty(); ++i) step();
  const auto decisions = segment_plan::decisions(graph);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].plans, "FM");
  // Tried: fused everywhere, members everywhere, then each segment flipped.
  ASSERT_GE(decisions[0].trials.size(), 3u);
  EXPECT_EQ(decisions[0].trials[0].first, "FF");
  EXPECT_EQ(decisions[0].trials[1].first, "MM");
  step();
  EXPECT_EQ(last, "FM");

  segment_plan::forget();  // as a new process: the plans come from forms.json
  step();
  EXPECT_EQ(last, "FM");
}

TEST_F(SegmentPlans, WithoutMeasurementOrForcedEveryCallTakesThatPlan) {
  autotune::setEnabled(false);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(segment_plan::useFused("g", i % 2, 2, {}));
  autotune::setEnabled(true);
  segment_plan::setForced(segment_plan::Plan::Members);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(segment_plan::useFused("g", i % 2, 2, {}));
}

// Through a fused module: training steps run the race to its end (each
// plan's results are the same function; FusionEquivalence checks them).
TEST_F(SegmentPlans, TrainingStepsOfAFusedModuleDecideItsPlans) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  const auto segments = fused.report.segments.size();
  const auto x = torch::randn({3, 32, 16});
  for (int i = 0; i < 100 && segment_plan::decisions(fused.report.plan_graph).empty(); ++i) {
    fused.module.forward({x}).toTensor().sum().backward();
  }
  const auto decisions = segment_plan::decisions(fused.report.plan_graph);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].plans.size(), segments);
  EXPECT_EQ(decisions[0].trials.size(), segments + 2);  // both everywhere, then each segment flipped
}

}  // namespace
}  // namespace hfta
