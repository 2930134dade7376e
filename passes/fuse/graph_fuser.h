#pragma once
// The fusion engine: rewrites one member's graph (the template, which every
// member runs in lockstep) into a graph that runs all B members at once.
//
// Every template value has a kind in the fused graph:
//   Uniform   — the same in every member: one value of the member's type
//               (constants, shapes, flags, a shared input).
//   Array     — per-member tensors, laid out member-leading: each tensor leaf
//               holds [B, *member_shape]; non-tensor leaves (in tuples) are
//               uniform.
//   Folded    — a per-member tensor [N, C, *] laid out channel-folded as
//               [N, B*C, *]: what convolutions and batch norms read and write,
//               and what ops that treat each channel alone (pooling,
//               element-wise, channel dropout) keep. Values stay folded
//               between such ops; a conversion (to Array: a view; from
//               Array: a copy) is inserted only where an op needs the other.
//   PerMember — a list of B values, one per member: non-tensor values that
//               differ per member (from the fallback), and the outputs of
//               control flow run per member, which may hold no value in a
//               member that took another path (they are stacked into an
//               Array only where an op reads them).
// Metadata queries (size, dim, len, numel) on an Array answer with the
// member's logical shape, so uniform control flow stays as it was.
#include <torch/csrc/jit/ir/ir.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hfta/hfta.h"
#include "passes/ir/stack_members.h"

namespace hfta {

enum class ValueKind { Uniform, Array, Folded, PerMember };

// Array or Folded: a tensor that differs per member.
inline bool isPerMemberTensor(ValueKind kind) { return kind == ValueKind::Array || kind == ValueKind::Folded; }

struct FusedValue {
  torch::jit::Value* value = nullptr;
  ValueKind kind = ValueKind::Uniform;
};

// True for the attribute types a fused module stacks: Tensor, Optional[Tensor]
// and List[Tensor] (each element stacked).
bool isStackedAttribute(const c10::TypePtr& type);

class GraphFuser {
 public:
  GraphFuser(torch::jit::Graph& fused, int64_t array_size, FusionReport& report);

  // Fuses the nodes of `tmpl` into `target` (appending before its return)
  // and returns the fused values of tmpl's outputs.
  std::vector<FusedValue> fuseBlock(torch::jit::Block* tmpl, torch::jit::Block* target);
  // Fuses one template node at the graph's insertion point.
  void fuseNode(torch::jit::Node* node);

  void bind(const torch::jit::Value* tmpl, FusedValue fused);
  const FusedValue& lookup(const torch::jit::Value* tmpl) const;

  // Conversions, inserted at the graph's insertion point.
  // Array form of any value ([B, ...] leaves); a uniform tensor becomes an
  // expand view, per-member tensors are stacked. Per-member non-tensor
  // values cannot be converted (internal error).
  torch::jit::Value* toArray(const FusedValue& value);
  // Like toArray, but a uniform tensor becomes a [1, ...] view that
  // broadcasts against [B, ...]: cheaper wherever the op broadcasts.
  torch::jit::Value* toArrayOrBroadcast(const FusedValue& value);
  // The channel-folded form of a tensor value ([N, B*C, *]); a uniform
  // tensor is repeated for every member.
  torch::jit::Value* toFolded(const FusedValue& value);
  // A list of B values, one per member.
  torch::jit::Value* toPerMember(const FusedValue& value);
  // Member b's value, for the per-member fallback.
  torch::jit::Value* memberValue(const FusedValue& value, int64_t b);

  // B member values stacked into one: tensors, optional tensors, tensor
  // lists and tuples of those become an Array, anything else a PerMember
  // list.
  FusedValue stackMembers(const std::vector<torch::jit::Value*>& members, const c10::TypePtr& type);

  // Per-member tensors whose sizes may differ between members (a packed
  // sequence's data): the fallback keeps them, and what it computes from
  // them, as B values (passes/fuse/fallback.cpp).
  void markRagged(const torch::jit::Value* tmpl) { ragged_.insert(tmpl); }
  bool isRagged(const torch::jit::Value* tmpl) const { return ragged_.count(tmpl) > 0; }

  // Removes `node` (a rule's attempt that it gave up), and every layout
  // conversion cached inside it.
  void discard(torch::jit::Node* node);

  torch::jit::Graph& graph() { return graph_; }
  int64_t arraySize() const { return array_size_; }
  FusionReport& report() { return report_; }

 private:
  bool isUniform(const torch::jit::Node* node) const;
  // A copy of `node` reading the fused values of its inputs, inserted.
  torch::jit::Node* insertAsIs(torch::jit::Node* node);
  void copyUniform(torch::jit::Node* node);
  // A conversion of `from` made earlier and visible at the insertion
  // point, or nullptr.
  torch::jit::Value* reuse(std::unordered_map<torch::jit::Value*, torch::jit::Value*>& cache,
                           torch::jit::Value* from) const;
  void forgetCopiesWrittenBy(const torch::jit::Node* node);

  torch::jit::Graph& graph_;
  int64_t array_size_;
  FusionReport& report_;
  std::unordered_map<const torch::jit::Value*, FusedValue> env_;
  // Layout conversions made so far, reused while valid: Folded -> Array
  // views always are; Array -> Folded copies until something is written
  // in place.
  std::unordered_map<torch::jit::Value*, torch::jit::Value*> array_views_;
  std::unordered_map<torch::jit::Value*, torch::jit::Value*> folded_copies_;
  std::unordered_set<const torch::jit::Value*> ragged_;
};

// Fuses `tmpl` for `array_size` members; input i of the result has kind
// input_kinds[i] and the template input's type. Tensor outputs are Arrays.
// With `segment_plans`, the graph runs in segments that each choose, by
// measurement, between their fused ops and their members' own ops
// (passes/fuse/segment_plans.h).
std::shared_ptr<torch::jit::Graph> fuseMemberGraph(const torch::jit::Graph& tmpl, int64_t array_size,
                                                   const std::vector<ValueKind>& input_kinds, FusionReport& report,
                                                   bool segment_plans = false);

}  // namespace hfta
