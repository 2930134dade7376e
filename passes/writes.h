#pragma once
// In-place writes found from the operators' alias annotations.
#include <torch/csrc/jit/ir/ir.h>

#include <set>

namespace hfta {

// Whether a node of `block` (nested blocks included) writes in place to one
// of `aliases` or to a view of one; `aliases` grows by the views it finds.
// (AliasDb would also count writes to a module's own buffers, which it
// cannot tell apart from the graph's inputs.)
bool writesTo(const torch::jit::Block* block, std::set<const torch::jit::Value*>& aliases);

}  // namespace hfta
