// hfta-train runs the fused graph as it is, with eager autograd, unless
// asked for TorchScript's profiling executor (train/trainer.h says why).
// Seen through the graph a graph executor ran last before each batch: with
// eager autograd no graph runs in the backward pass, so that is the fused
// forward, without JIT autodiff's differentiable subgraphs; under the
// profiling executor it is the backward graph of such a subgraph.
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <functional>
#include <string>

#include "run/run.h"
#include "tests/test_support.h"

namespace hfta::train {
namespace {

bool hasNode(const torch::jit::Block* block, const std::function<bool(const torch::jit::Node*)>& wanted) {
  for (const auto* node : block->nodes()) {
    if (wanted(node)) return true;
    for (const auto* inner : node->blocks()) {
      if (hasNode(inner, wanted)) return true;
    }
  }
  return false;
}

bool hasDifferentiableGraph(const torch::jit::Graph& graph) {
  return hasNode(graph.block(), [](const auto* n) { return n->kind() == c10::prim::DifferentiableGraph; });
}

bool runsFusedConvolutions(const torch::jit::Graph& graph) {
  return hasNode(graph.block(), [](const auto* n) { return n->kind().toQualString() == std::string("hfta::conv"); });
}

// The graph the executor ran for the last training batch of an epoch of
// two digits CNNs (10 batches: past the profiling executor's profiling runs).
std::shared_ptr<torch::jit::Graph> lastTrainingGraph(bool profiling_executor) {
  RunConfig c;
  c.model = testing::modelPath("digits_0.pt");
  c.array_size = 2;
  c.dataset = "synthetic";
  c.limit = 400;
  c.holdout = 0.2;
  c.options.epochs = 1;
  c.options.batch_size = 32;
  c.options.profiling_executor = profiling_executor;
  Run run(c);
  std::shared_ptr<torch::jit::Graph> last;
  run.nextEpoch([&](int64_t, int64_t) {  // (before each batch: the graph of the batch before)
    last = torch::jit::lastExecutedOptimizedGraph();
    return false;  // go on
  });
  return last;
}

TEST(TrainerExecutor, RunsTheFusedGraphWithEagerAutogradByDefault) {
  const auto graph = lastTrainingGraph(/*profiling_executor=*/false);
  ASSERT_NE(graph, nullptr);
  EXPECT_TRUE(runsFusedConvolutions(*graph)) << *graph;
  EXPECT_FALSE(hasDifferentiableGraph(*graph)) << *graph;
}

TEST(TrainerExecutor, TheProfilingExecutorWhenAsked) {
  // One plan in every segment: the profiling executor profiles only the
  // branch of each segment's If that ran, and where the raced plans mix
  // fused and members' segments it built no differentiable graph (the
  // step then runs eager autograd, as by default).
  const testing::SegmentPlanScope fused(segment_plan::Plan::Fused);
  const auto graph = lastTrainingGraph(/*profiling_executor=*/true);
  ASSERT_NE(graph, nullptr);
  EXPECT_FALSE(runsFusedConvolutions(*graph)) << *graph;  // a JIT autodiff backward graph
}

}  // namespace
}  // namespace hfta::train
