#pragma once
// What a fusion rule sees: the template node, the fused values of its
// inputs, and helpers that insert fused IR at the right place.
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <unordered_map>

#include "passes/fuse/graph_fuser.h"

namespace hfta {

// A rule fuses the node, or declines and says why (the reason reaches the
// fusion report, and the node runs per member instead).
struct RuleResult {
  std::optional<std::string> declined;
  static RuleResult fused() { return {}; }
  static RuleResult decline(std::string why) { return {std::move(why)}; }
};

// The ints of a constant int list (a constant, or a list built of
// constants), or nullopt.
std::optional<std::vector<int64_t>> constantInts(torch::jit::Value* v);

class RuleContext {
 public:
  RuleContext(GraphFuser& fuser, torch::jit::Node* node) : fuser_(fuser), node_(node) {}

  torch::jit::Node* node() const { return node_; }
  torch::jit::Graph& graph() { return fuser_.graph(); }
  GraphFuser& fuser() { return fuser_; }
  int64_t arraySize() const { return fuser_.arraySize(); }

  const FusedValue& input(size_t i) const { return fuser_.lookup(node_->input(i)); }
  ValueKind kind(size_t i) const { return input(i).kind; }
  // True if inputs first, first + 1, ... are all uniform.
  bool uniformFrom(size_t first) const;

  torch::jit::Value* array(size_t i) { return fuser_.toArray(input(i)); }
  torch::jit::Value* arrayOrBroadcast(size_t i) { return fuser_.toArrayOrBroadcast(input(i)); }
  torch::jit::Value* folded(size_t i) { return fuser_.toFolded(input(i)); }
  torch::jit::Value* uniform(size_t i) const;
  // An optional per-member tensor (a bias): None stays None.
  torch::jit::Value* arrayOrNone(size_t i);
  // Input i is a member dim (a uniform int): the same dim in [B, ...].
  torch::jit::Value* stackedDim(size_t i);
  // Input i is a list of member dims (uniform ints); None stays None.
  torch::jit::Value* stackedDims(size_t i);
  // Input i is a member shape (a uniform int list): [B] + shape.
  torch::jit::Value* stackedShape(size_t i);

  torch::jit::Value* insert(c10::Symbol op, std::vector<torch::jit::NamedValue> args,
                            std::vector<torch::jit::NamedValue> kwargs = {});
  // A copy of the node whose inputs are `replaced` where given and the
  // (uniform) fused inputs elsewhere, inserted; outputs are not bound.
  torch::jit::Node* insertCopy(const std::unordered_map<size_t, torch::jit::Value*>& replaced);
  // Binds output i of the template node.
  void bindOutput(size_t i, torch::jit::Value* value, ValueKind kind);
  // Binds every output of `copy` by type: outputs holding tensors get
  // `tensor_kind` (Array or Folded), the others are uniform.
  void bindOutputsByType(torch::jit::Node* copy, ValueKind tensor_kind = ValueKind::Array);
  // True if input i is Folded and the inputs at `dims` are constant member
  // dims past the channel dim (>= 2), which mean the same in the folded
  // layout: the op can then run on the folded value as it is.
  bool foldedWithSpatialDims(size_t i, const std::vector<size_t>& dims) const;

 private:
  GraphFuser& fuser_;
  torch::jit::Node* node_;
};

// Fuses the node as the hfta:: op `op`, whose schema is the ATen op's with
// a member dim on every tensor: tensor inputs become arrays (the inputs at
// `broadcastable` may stay one [1, ...] value all members share; None stays
// None) and every other input must be the same in every member. Outputs
// holding tensors are arrays.
RuleResult fuseAsMemberOp(RuleContext& ctx, c10::Symbol op, const std::vector<size_t>& broadcastable);

}  // namespace hfta
