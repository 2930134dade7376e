#pragma once
// Inlining every level of method and function calls into a graph, whatever
// the graph executor's setting.
#include <torch/csrc/jit/ir/ir.h>

namespace hfta {

// torch::jit::Inline() pastes each callee's optimized graph, which has its
// own calls inlined only while the graph executor optimizes
// (torch::jit::setGraphExecutorOptimize): this repeats it until no call is
// left (or 64 levels; a call left after that stays a call).
void inlineAllCalls(torch::jit::Graph& graph);

}  // namespace hfta
