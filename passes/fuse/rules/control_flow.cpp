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
// A Loop whose trip count is uniform stays one Loop likewise, its carried
// tensors Arrays where they differ per member. An If on a per-member
// condition, or a Loop whose trip count or condition differs per member,
// runs per member.
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <optional>
#include <string>

#include "passes/fuse/rules/rules.h"
#include "support/torch_types.h"

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

// One attempt at the Loop with its carried values of these kinds (Uniform
// or Array): the Loop with a fused body, inserted; `retry` if a carried
// value taken as uniform comes out per member (marked Array in `carried`
// for the next attempt); `declined` if the loop cannot stay one loop.
struct LoopAttempt {
  Node* loop = nullptr;
  bool retry = false;
  std::optional<std::string> declined;
};

LoopAttempt tryLoop(RuleContext& ctx, std::vector<ValueKind>& carried) {
  Node* tmpl = ctx.node();
  auto& g = ctx.graph();
  std::vector<torch::jit::Value*> inputs{ctx.uniform(0), ctx.uniform(1)};
  for (size_t i = 0; i < carried.size(); ++i) {
    const size_t input = i + 2;
    if (carried[i] == ValueKind::Uniform) {
      inputs.push_back(ctx.uniform(input));
    } else if (ctx.kind(input) == ValueKind::Uniform && ctx.node()->input(input)->type()->cast<c10::TensorType>()) {
      // A uniform start of a per-member tensor: B copies (the body may
      // write into it in place, which a broadcast view would not take).
      inputs.push_back(ctx.insert(c10::aten::contiguous, {ctx.array(input)}));
    } else {
      inputs.push_back(ctx.array(input));
    }
  }
  Node* fused = g.insertNode(g.create(c10::prim::Loop, inputs, 0));
  Block* tmpl_body = tmpl->blocks()[0];
  Block* body = fused->addBlock();
  for (size_t i = 0; i < tmpl_body->inputs().size(); ++i) {
    torch::jit::Value* param = tmpl_body->inputs()[i];
    ctx.fuser().bind(param, {body->addInput()->setType(param->type()), i == 0 ? ValueKind::Uniform : carried[i - 1]});
  }
  const auto outputs = ctx.fuser().fuseBlock(tmpl_body, body);
  if (outputs[0].kind != ValueKind::Uniform) return {fused, false, "whether the loop goes on differs per member"};
  WithInsertPoint end_of_body(body);
  body->registerOutput(outputs[0].value);
  bool retry = false;
  for (size_t i = 0; i < carried.size(); ++i) {
    const auto& out = outputs[i + 1];
    if (carried[i] == ValueKind::Array) {
      body->registerOutput(ctx.fuser().toArray(out));
    } else if (out.kind == ValueKind::Uniform) {
      body->registerOutput(out.value);
    } else if (containsTensor(tmpl->output(i)->type()) && out.kind != ValueKind::PerMember) {
      carried[i] = ValueKind::Array;
      retry = true;
    } else {
      return {fused, false, "a value carried by the loop is not a tensor and differs per member"};
    }
  }
  if (!retry) {
    for (size_t i = 0; i < tmpl->outputs().size(); ++i) fused->addOutput()->setType(tmpl->output(i)->type());
  }
  return {fused, retry, std::nullopt};
}

// A Loop whose trip count and condition are the same in every member stays
// one Loop with a fused body (shape arithmetic over per-member tensors'
// sizes; time steps of a recurrent cell). Carried tensors that differ per
// member are carried as Arrays: one attempt with the kinds the loop is
// entered with, another if the body makes a uniform one per member.
//
//   %h = prim::Loop(%steps, %true, %zeros)          %h = prim::Loop(%steps, %true, %zeros_b : [B, N, H])
//     block0(%t, %h_t):                      ->       block0(%t, %h_t : [B, N, H]):
//       %h_next = aten::rnn_tanh_cell(...)              %h_next = hfta::rnn_tanh_cell(...)
RuleResult fuseLoop(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Uniform || ctx.kind(1) != ValueKind::Uniform) {
    return RuleResult::decline("the loop's trip count or condition differs per member");
  }
  std::vector<ValueKind> carried;
  for (size_t i = 2; i < ctx.node()->inputs().size(); ++i) {
    if (ctx.kind(i) == ValueKind::PerMember) {
      return RuleResult::decline("a value carried by the loop is not a tensor and differs per member");
    }
    carried.push_back(ctx.kind(i) == ValueKind::Uniform ? ValueKind::Uniform : ValueKind::Array);
  }
  auto& report = ctx.fuser().report();
  const auto fused_mark = report.fused.size(), fallback_mark = report.fallbacks.size();
  // Each attempt but the last turns at least one carried value to Array.
  for (size_t attempt = 0; attempt <= carried.size(); ++attempt) {
    auto [loop, retry, declined] = tryLoop(ctx, carried);
    if (!retry && !declined) {
      for (size_t i = 0; i < carried.size(); ++i) ctx.bindOutput(i, loop->output(i), carried[i]);
      return RuleResult::fused();
    }
    // What the body's rules reported belongs to the attempt given up.
    report.fused.resize(fused_mark);
    report.fallbacks.resize(fallback_mark);
    ctx.fuser().discard(loop);
    if (declined) return RuleResult::decline(*declined);
  }
  TORCH_INTERNAL_ASSERT(false, "hfta: the loop's carried kinds did not settle");
}

}  // namespace

std::vector<Rule> rules::control_flow() { return {{"prim::If", fuseIf}, {"prim::Loop", fuseLoop}}; }

}  // namespace hfta
