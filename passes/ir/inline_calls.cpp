#include "passes/ir/inline_calls.h"

#include <torch/csrc/jit/passes/inliner.h>

#include "passes/ir/walk.h"

namespace hfta {
namespace {

bool hasCalls(const torch::jit::Block* block) {
  return anyNode(block, [](const torch::jit::Node* node) {
    return node->kind() == torch::jit::prim::CallMethod || node->kind() == torch::jit::prim::CallFunction;
  });
}

}  // namespace

void inlineAllCalls(torch::jit::Graph& graph) {
  constexpr int kMaxDepth = 64;
  for (int depth = 0; depth < kMaxDepth && hasCalls(graph.block()); ++depth) torch::jit::Inline(graph);
}

}  // namespace hfta
