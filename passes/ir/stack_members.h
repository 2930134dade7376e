#pragma once
// B members' values stacked into one value of the fused graph: what both
// fusers (the module fuser's GraphFuser and fuseParallel's graph pass)
// insert where per-member values meet fused code.
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <vector>

namespace hfta {

// True for Tensor and Optional[Tensor]: the types an Array leaf can have.
bool isTensorLike(const c10::TypePtr& type);

// The members' values of `type`, stacked along a new leading dim: tensors
// (aten::stack), optional tensors (hfta::stack_members_optional: None in
// all, or a tensor in all), tensor lists (each element stacked) and tuples
// of tensor-likes (element by element). nullopt for any other type: such
// values cannot become one array.
std::optional<torch::jit::Value*> stackMembers(torch::jit::Graph& graph, const std::vector<torch::jit::Value*>& members,
                                               const c10::TypePtr& type);

}  // namespace hfta
