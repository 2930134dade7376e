#pragma once
// The generic fallback: a node no rule fuses runs once per member on member
// b's slice of every per-member input, and the B results are stacked again.
// Correct for any node (blocks included), only not fused.
#include "passes/fuse/graph_fuser.h"

namespace hfta {

void runPerMember(GraphFuser& fuser, torch::jit::Node* node);

// Inside a block cloned for member b, a read of a stacked parameter or
// buffer gives all B members: narrows each to member b where it is read.
void narrowAttributeReads(torch::jit::Block* block, int64_t b);

}  // namespace hfta
