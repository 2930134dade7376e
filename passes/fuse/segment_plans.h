#pragma once
// Fusing a member graph in segments, each emitted with two plans that
// compute the same function, chosen at run time by measurement
// (runtime/ops/segment_plan.h):
//
//   %fused = hfta::segment_plan(%graph, %i, %count, %self, %inputs)
//   %y = prim::If(%fused)
//     block0(): ... the segment's fused ops ...           -> (%y_fused)
//     block1(): ... member 0's own ops on its slices ...
//               ... member B-1's own ops ...
//               %y_members = stack (or cat, for a folded value) -> (%y_members)
//
// Segments end where one tensor carries the computation on (a fold point:
// between layers, not inside a residual block), at most kMaxSegments of
// about equal work. A segment whose members' ops cannot stand in (it sets a
// module attribute, draws random numbers, writes into a value the members
// share, or makes tensors whose sizes differ between members) is emitted
// fused only; the report says why. The first segment's plan op reads the
// module and its forward's inputs (%self, %inputs), which the runtime's
// race runs copies of; the others read neither.
#include <string>
#include <vector>

#include "passes/fuse/graph_fuser.h"

namespace hfta {

// Fuses the nodes of the top-level block `tmpl` into the fused graph at its
// insertion point, segment by segment, and returns the fused values of
// tmpl's outputs. `graph` names the template for the runtime's choices.
std::vector<FusedValue> fuseInSegments(GraphFuser& fuser, torch::jit::Block* tmpl, const std::string& graph);

// What the runtime keeps a template's plans under: a hash of its IR, the
// array size and the input kinds.
std::string planGraphKey(const torch::jit::Graph& tmpl, int64_t array_size, const std::vector<ValueKind>& input_kinds);

}  // namespace hfta
