// Control flow that is the same in every member stays control flow: an If
// on a uniform condition becomes one If whose branches are fused. A branch
// output that is an Array in one branch is made an Array in the other too.
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

RuleResult fuseIf(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Uniform) return RuleResult::decline("the condition differs per member");
  Node* tmpl = ctx.node();
  auto& g = ctx.graph();
  Node* fused = g.insertNode(g.create(c10::prim::If, {ctx.uniform(0)}, 0));
  std::vector<std::vector<FusedValue>> branch_outputs;
  for (Block* block : tmpl->blocks()) {
    branch_outputs.push_back(ctx.fuser().fuseBlock(block, fused->addBlock()));
  }
  for (const auto& outputs : branch_outputs) {
    for (const auto& out : outputs) {
      if (out.kind == ValueKind::PerMember) {
        fused->destroy();
        return RuleResult::decline("a branch returns a non-tensor value that differs per member");
      }
    }
  }
  for (size_t i = 0; i < tmpl->outputs().size(); ++i) {
    ValueKind kind = ValueKind::Uniform;
    for (const auto& outputs : branch_outputs) {
      if (outputs[i].kind == ValueKind::Array) kind = ValueKind::Array;
    }
    for (size_t b = 0; b < branch_outputs.size(); ++b) {
      WithInsertPoint end_of_branch(fused->blocks()[b]);
      auto* out = kind == ValueKind::Array ? ctx.fuser().toArray(branch_outputs[b][i])
                                           : branch_outputs[b][i].value;
      fused->blocks()[b]->registerOutput(out);
    }
    fused->addOutput()->setType(tmpl->output(i)->type());
    ctx.bindOutput(i, fused->output(i), kind);
  }
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> controlFlowRules() { return {{"prim::If", "control flow", fuseIf}}; }

}  // namespace hfta
