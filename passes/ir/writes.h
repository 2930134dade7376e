#pragma once
// In-place writes, found from the operators' alias annotations (the `(a!)`
// of `aten::add_(Tensor(a!) self, ...)`).
#include <torch/csrc/jit/ir/ir.h>

#include <set>
#include <vector>

namespace hfta {

// The indices of the inputs `node` writes in place (none for a node
// without a schema, such as prim::If; its blocks' nodes are their own).
std::vector<size_t> writtenInputs(const torch::jit::Node* node);

// Whether `node`, or a node in its blocks, writes anything in place.
bool writesInPlace(const torch::jit::Node* node);

// Whether a node of `block` (nested blocks included) writes in place to one
// of `aliases` or to a view of one; `aliases` grows by the views it finds.
// (AliasDb would also count writes to a module's own buffers, which it
// cannot tell apart from the graph's inputs.)
bool writesTo(const torch::jit::Block* block, std::set<const torch::jit::Value*>& aliases);

}  // namespace hfta
