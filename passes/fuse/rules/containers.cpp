// Lists and tuples of per-member tensors are Arrays whose tensor leaves are
// [B, ...] (a uniform tensor joining them is broadcast to B members);
// unpacking or indexing one gives Arrays back. cat and stack then work on
// member dims as the shape rules do.
#include "passes/fuse/rules/rules.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

// Builds the list or tuple from Array forms of its elements.
RuleResult fuseConstruct(RuleContext& ctx) {
  std::unordered_map<size_t, torch::jit::Value*> replaced;
  for (size_t i = 0; i < ctx.node()->inputs().size(); ++i) {
    const bool tensor = containsTensor(ctx.node()->input(i)->type());
    if (ctx.kind(i) == ValueKind::PerMember || (!tensor && ctx.kind(i) != ValueKind::Uniform)) {
      return RuleResult::decline("an element is a non-tensor value that differs per member");
    }
  }
  for (size_t i = 0; i < ctx.node()->inputs().size(); ++i) {
    if (containsTensor(ctx.node()->input(i)->type())) replaced[i] = ctx.array(i);
  }
  ctx.bindOutputsByType(ctx.insertCopy(replaced));
  return RuleResult::fused();
}

// Unpacking and indexing: the container is an Array, any index uniform.
RuleResult fuseAccess(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array)
    return RuleResult::decline("the container differs per member and is not an array");
  if (!ctx.uniformFrom(1)) return RuleResult::decline("the index differs per member");
  ctx.bindOutputsByType(ctx.insertCopy({}));
  return RuleResult::fused();
}

// x is None / is not None on an optional per-member tensor: the members
// agree (a stacked optional is None in all of them or in none).
RuleResult fuseIsNone(RuleContext& ctx) {
  if (ctx.kind(0) == ValueKind::PerMember || ctx.kind(1) == ValueKind::PerMember) {
    return RuleResult::decline("compares values that are not tensors and differ per member");
  }
  auto* copy = ctx.insertCopy({});
  ctx.bindOutput(0, copy->output(), ValueKind::Uniform);
  return RuleResult::fused();
}

// The Tensor inside an Optional[Tensor] array is that array (likewise a
// tuple inside an Optional[Tuple[...]]).
RuleResult fuseUncheckedCast(RuleContext& ctx) {
  if (!isPerMemberTensor(ctx.kind(0)) || !containsTensor(ctx.node()->output()->type())) {
    return RuleResult::decline("casts a value that is not a per-member tensor");
  }
  auto* copy = ctx.insertCopy({{0, ctx.array(0)}});
  ctx.bindOutput(0, copy->output(), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseListLength(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array) return RuleResult::decline("the list differs per member");
  ctx.bindOutput(0, ctx.insertCopy({})->output(), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult fuseConcat(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array || ctx.kind(1) != ValueKind::Uniform) {
    return RuleResult::decline("the tensor list or the dim differs per member and is not an array");
  }
  ctx.bindOutputsByType(ctx.insertCopy({{1, ctx.stackedDim(1)}}));
  return RuleResult::fused();
}

RuleResult fuseAppend(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array) {
    return RuleResult::decline("appends per-member tensors to a list all members share");
  }
  if (ctx.kind(1) == ValueKind::PerMember) return RuleResult::decline("the element is not a tensor");
  ctx.bindOutputsByType(ctx.insertCopy({{1, ctx.array(1)}}));
  return RuleResult::fused();
}

}  // namespace

std::vector<Rule> rules::containers() {
  return {
      {"prim::ListConstruct", fuseConstruct},
      {"prim::TupleConstruct", fuseConstruct},
      {"prim::ListUnpack", fuseAccess},
      {"prim::TupleUnpack", fuseAccess},
      {"prim::TupleIndex(Any tup, int i) -> Any", fuseAccess},
      {"aten::__getitem__.t(t[](a) list, int idx) -> t(*)", fuseAccess},
      {"aten::len.t(t[] a) -> int", fuseListLength},
      {"aten::__is__(t1 self, t2 obj) -> bool", fuseIsNone},
      {"aten::__isnot__(t1 self, t2 obj) -> bool", fuseIsNone},
      {"prim::unchecked_cast", fuseUncheckedCast},
      {"aten::cat(Tensor[] tensors, int dim=0) -> Tensor", fuseConcat},
      {"aten::stack(Tensor[] tensors, int dim=0) -> Tensor", fuseConcat},
      {"aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)", fuseAppend},
  };
}

}  // namespace hfta
