#include "passes/ir/executor_graph.h"

#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include "passes/ir/inline_calls.h"

namespace hfta {

std::shared_ptr<torch::jit::Graph> executorGraph(const torch::jit::Module& module) {
  auto graph = module.get_method("forward").graph()->copy();
  inlineAllCalls(*graph);
  torch::jit::LowerSimpleTuples(graph);
  torch::jit::EliminateDeadCode(graph);
  torch::jit::EliminateCommonSubexpression(graph);
  torch::jit::PeepholeOptimize(graph);
  torch::jit::ConstantPropagation(graph);
  torch::jit::ConstantPooling(graph);
  torch::jit::UnrollLoops(graph);
  torch::jit::RemoveListMutation(graph);
  torch::jit::PeepholeOptimize(graph);
  torch::jit::EliminateCommonSubexpression(graph);
  return graph;
}

}  // namespace hfta
