#pragma once
// The generic fallback: a node no rule fuses runs once per member on member
// b's slice of every per-member input, and the B results are stacked again.
// Correct for any node (blocks included), only not fused.
#include "passes/fuse/graph_fuser.h"

namespace hfta {

void runPerMember(GraphFuser& fuser, torch::jit::Node* node);

}  // namespace hfta
