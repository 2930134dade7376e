// Control flow that is the same in every member stays control flow: an If
// on a uniform condition becomes one If whose branches are fused. A branch
// output that differs per member in one branch is converted to the same
// kind in the other (an Array, or a per-member list of non-tensors, as
// batch norm's momentum=None computes in training mode).
//
//   %y = prim::If(%training)            ->  %y = prim::If(%training)
//     block0(): -> (aten::dropout(%x))        block0(): -> (aten::dropout(%x : [B, ...]))
//     block1(): -> (%x)                       block1(): -> (%x : [B, ...])
//
// An If on a per-member condition (or a Loop that carries per-member values)
// has no rule and runs per member.
#include <torch/csrc/jit/ir/ir.h>

#include "passes/rules/rules.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::WithInsertPoint;

// The kind an If output takes when its branches give these: folded if all
// are, else per-member values if any is, else an array if any differs per
// member.
ValueKind joinKinds(const std::vector<FusedValue>& branches) {
  auto any = [&](ValueKind k) {
    return std::any_of(branches.begin(), branches.end(), [&](const FusedValue& v) { return v.kind == k; });
  };
  const bool all_folded = std::all_of(branches.begin(), branches.end(),
                                      [](const FusedValue& v) { return v.kind == ValueKind::Folded; });
  if (all_folded) return ValueKind::Folded;
  if (any(ValueKind::PerMember)) return ValueKind::PerMember;
  if (any(ValueKind::Array) || any(ValueKind::Folded)) return ValueKind::Array;
  return ValueKind::Uniform;
}

torch::jit::Value* convert(GraphFuser& fuser, const FusedValue& value, ValueKind kind) {
  switch (kind) {
    case ValueKind::PerMember:
      return fuser.toPerMember(value);
    case ValueKind::Array:
      return fuser.toArray(value);
    case ValueKind::Folded:
    case ValueKind::Uniform:
      break;
  }
  return value.value;
}

RuleResult fuseIf(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Uniform) return RuleResult::decline("the condition differs per member");
  Node* tmpl = ctx.node();
  auto& g = ctx.graph();
  Node* fused = g.insertNode(g.create(c10::prim::If, {ctx.uniform(0)}, 0));
  std::vector<std::vector<FusedValue>> branch_outputs;
  for (Block* block : tmpl->blocks()) {
    branch_outputs.push_back(ctx.fuser().fuseBlock(block, fused->addBlock()));
  }
  for (size_t i = 0; i < tmpl->outputs().size(); ++i) {
    std::vector<FusedValue> per_branch;
    for (const auto& outputs : branch_outputs) per_branch.push_back(outputs[i]);
    const ValueKind kind = joinKinds(per_branch);
    for (size_t b = 0; b < branch_outputs.size(); ++b) {
      WithInsertPoint end_of_branch(fused->blocks()[b]);
      fused->blocks()[b]->registerOutput(convert(ctx.fuser(), per_branch[b], kind));
    }
    fused->addOutput()->setType(kind == ValueKind::PerMember
                                    ? c10::ListType::create(tmpl->output(i)->type())
                                    : tmpl->output(i)->type());
    ctx.bindOutput(i, fused->output(i), kind);
  }
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> controlFlowRules() { return {{"prim::If", "control flow", fuseIf}}; }

}  // namespace hfta
