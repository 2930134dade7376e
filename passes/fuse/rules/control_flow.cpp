// Control flow that is the same in every member stays control flow: an If
// on a uniform condition becomes one If whose branches are fused. A branch
// output that differs per member in one branch is converted to the same
// kind in the other (an Array, or a per-member list of non-tensors, as
// batch norm's momentum=None computes in training mode). What a branch
// that raises leaves undefined takes the other branches' kind.
//
//   %y = prim::If(%training)            ->  %y = prim::If(%training)
//     block0(): -> (aten::dropout(%x))        block0(): -> (aten::dropout(%x : [B, ...]))
//     block1(): -> (%x)                       block1(): -> (%x : [B, ...])
//
// A Loop whose trip count and carried values are uniform (shape arithmetic
// over a per-member tensor's sizes) stays one Loop likewise. An If on a
// per-member condition, or a Loop that carries per-member values, runs per
// member.
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>

#include "passes/fuse/rules/rules.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::WithInsertPoint;

// What a branch that raises (or returns early) leaves undefined: never read,
// so it takes whatever kind the other branches give.
bool isUndefined(const FusedValue& v) { return v.value->node()->kind() == c10::prim::Uninitialized; }

// The kind an If output takes when its branches give these: folded if all
// are, else per-member values if any is, else an array if any differs per
// member. Undefined values count only if every branch gives one (so
// F.interpolate, whose unsupported cases raise, keeps a folded value
// folded).
ValueKind joinKinds(std::vector<FusedValue> branches) {
  if (!std::all_of(branches.begin(), branches.end(), isUndefined)) {
    branches.erase(std::remove_if(branches.begin(), branches.end(), isUndefined), branches.end());
  }
  auto any = [&](ValueKind k) {
    return std::any_of(branches.begin(), branches.end(), [&](const FusedValue& v) { return v.kind == k; });
  };
  const bool all_folded =
      std::all_of(branches.begin(), branches.end(), [](const FusedValue& v) { return v.kind == ValueKind::Folded; });
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
  if (auto taken = torch::jit::constant_as<bool>(ctx.uniform(0))) {
    // A constant condition (a default argument such as inplace=False,
    // inlined): only the branch taken is fused, in place of the If, so the
    // other one cannot make fusion refuse code that never runs.
    const auto outputs = ctx.fuser().fuseBlock(tmpl->blocks()[*taken ? 0 : 1], g.insertPoint()->owningBlock());
    for (size_t i = 0; i < outputs.size(); ++i) ctx.bindOutput(i, outputs[i].value, outputs[i].kind);
    return RuleResult::fused();
  }
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
    fused->addOutput()->setType(kind == ValueKind::PerMember ? c10::ListType::create(tmpl->output(i)->type())
                                                             : tmpl->output(i)->type());
    ctx.bindOutput(i, fused->output(i), kind);
  }
  return RuleResult::fused();
}

// A Loop whose trip count, condition and carried values are the same in
// every member (shape arithmetic that reads per-member tensors' sizes) stays
// one Loop with a fused body.
RuleResult fuseLoop(RuleContext& ctx) {
  if (!ctx.uniformFrom(0)) return RuleResult::decline("the loop's trip count or carried values differ per member");
  Node* tmpl = ctx.node();
  auto& g = ctx.graph();
  std::vector<torch::jit::Value*> inputs;
  for (size_t i = 0; i < tmpl->inputs().size(); ++i) inputs.push_back(ctx.uniform(i));
  Node* fused = g.insertNode(g.create(c10::prim::Loop, inputs, 0));
  Block* tmpl_body = tmpl->blocks()[0];
  Block* body = fused->addBlock();
  for (torch::jit::Value* param : tmpl_body->inputs()) {
    ctx.fuser().bind(param, {body->addInput()->setType(param->type()), ValueKind::Uniform});
  }
  const auto outputs = ctx.fuser().fuseBlock(tmpl_body, body);
  for (const auto& out : outputs) {
    if (out.kind != ValueKind::Uniform) {
      fused->destroy();
      return RuleResult::decline("a value carried by the loop differs per member");
    }
    body->registerOutput(out.value);
  }
  for (size_t i = 0; i < tmpl->outputs().size(); ++i) {
    fused->addOutput()->setType(tmpl->output(i)->type());
    ctx.bindOutput(i, fused->output(i), ValueKind::Uniform);
  }
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> controlFlowRules() {
  return {{"prim::If", "control flow", fuseIf}, {"prim::Loop", "control flow", fuseLoop}};
}

}  // namespace hfta
