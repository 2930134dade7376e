#include "passes/inline_calls.h"

#include <torch/csrc/jit/passes/inliner.h>

namespace hfta {
namespace {

size_t countCalls(const torch::jit::Block* block) {
  size_t calls = 0;
  for (const auto* node : block->nodes()) {
    calls += node->kind() == torch::jit::prim::CallMethod || node->kind() == torch::jit::prim::CallFunction;
    for (const auto* inner : node->blocks()) calls += countCalls(inner);
  }
  return calls;
}

}  // namespace

void inlineAllCalls(torch::jit::Graph& graph) {
  constexpr int kMaxDepth = 64;
  for (int depth = 0; depth < kMaxDepth && countCalls(graph.block()) > 0; ++depth) torch::jit::Inline(graph);
}

}  // namespace hfta
