#pragma once
// Fusion inside one graph: the graph of a module's forward with every call
// inlined, as TorchScript's graph executor holds it. No module object is
// needed: the members are found from the graph alone, and their parameters
// stay theirs (an optimizer over module.parameters() keeps working).
//
// Members are sibling submodules of one TorchScript type (the members of an
// nn.ModuleList, parallel branches). Member b's region is the nodes that
// depend on member b and on no other member. B >= 2 regions that are the
// same program (lockstep matching) are rewritten with the engine of
// hfta-fuse: the stacked parameters are computed in the graph
// (aten::stack of the members' own, so gradients reach them), buffers the
// fused ops update are copied back, and the members' outputs are slices of
// the fused outputs. What the graph cannot tell (tensor shapes, a tensor
// two members share, flags like `training`) is checked when it runs: the
// fused code sits in a prim::If whose other branch is the members' original
// code.
//
//   hfta::ParallelFusionReport report = hfta::fuseParallelGraph(graph);
#include <torch/csrc/jit/ir/ir.h>

#include "passes/parallel_fusion.h"

namespace hfta {

ParallelFusionReport fuseParallelGraph(const std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace hfta
