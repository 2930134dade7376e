// Shape ops and metadata. In the member-leading layout a member dim d >= 0
// is dim d + 1 of the array (negative dims count from the end and stay), and
// a member shape s is [B] + s. Metadata queries answer with the member's
// logical shape, so code that branches on shapes behaves as in one member:
//
//   %n = aten::size(%x, %c0)     ->  %n = aten::size(%x, %c1)
//   %d = aten::dim(%x)           ->  %e = aten::dim(%x); %d = aten::sub(%e, %c1)
//   %y = aten::view(%x, %shape)  ->  %s = aten::add(%cB, %shape); %y = aten::view(%x, %s)
#include "passes/rules/rules.h"

namespace hfta {
namespace {

// The array at input 0; the inputs at DimArgs are member dims; any other
// input must be uniform.
template <size_t... DimArgs>
RuleResult fuseWithDims(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  std::unordered_map<size_t, torch::jit::Value*> replaced{{0, ctx.array(0)}};
  ((replaced[DimArgs] = ctx.stackedDim(DimArgs)), ...);
  ctx.bindOutputsByType(ctx.insertCopy(replaced));
  return RuleResult::fused();
}

// A reduction over member dims; over all dims (None) it would mix members.
RuleResult fuseReduction(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  const auto dims = torch::jit::constant_as<std::vector<int64_t>>(ctx.input(1).value);
  if (ctx.input(1).value->mustBeNone() || (dims && dims->empty())) {
    return RuleResult::decline("a reduction over all dims would reduce across members");
  }
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedDims(1)}}));
  return RuleResult::fused();
}

RuleResult fuseWithShape(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the shape differs per member");
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedShape(1)}}));
  return RuleResult::fused();
}

RuleResult fuseSizeOfDim(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the dim differs per member");
  ctx.bindOutput(0, ctx.insert(c10::aten::size, {ctx.array(0), ctx.stackedDim(1)}), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult fuseSizes(RuleContext& ctx) {
  auto* sizes = ctx.insert(c10::aten::size, {ctx.array(0)});
  auto* none = ctx.graph().insertConstant(c10::IValue());
  ctx.bindOutput(0, ctx.insert(c10::aten::slice, {sizes, 1, none, 1}), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult fuseDim(RuleContext& ctx) {
  auto* dim = ctx.insert(c10::aten::dim, {ctx.array(0)});
  ctx.bindOutput(0, ctx.insert(c10::aten::sub, {dim, 1}), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult fuseLength(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.insert(c10::aten::size, {ctx.array(0), 1}), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult fuseNumel(RuleContext& ctx) {
  auto* numel = ctx.insert(c10::Symbol::fromQualString("aten::numel"), {ctx.array(0)});
  ctx.bindOutput(0, ctx.insert(c10::aten::floordiv, {numel, ctx.arraySize()}), ValueKind::Uniform);
  return RuleResult::fused();
}

// dtype, device and friends are the same for the array as for each member.
RuleResult fuseMemberInvariant(RuleContext& ctx) {
  auto* copy = ctx.insertCopy({{0, ctx.array(0)}});
  for (size_t i = 0; i < copy->outputs().size(); ++i) {
    ctx.bindOutput(i, copy->output(i), ValueKind::Uniform);
  }
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> shapeRules() {
  constexpr const char* kFamily = "shape";
  return {
      {"aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", kFamily, fuseWithDims<1, 2>},
      {"aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", kFamily, fuseWithDims<1>},
      {"aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", kFamily, fuseWithDims<1>},
      {"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", kFamily, fuseWithDims<1, 2>},
      {"aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", kFamily, fuseWithDims<1>},
      {"aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", kFamily, fuseWithDims<1>},
      {"aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=0) -> Tensor(a)", kFamily, fuseWithDims<>},
      {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", kFamily, fuseReduction},
      {"aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", kFamily, fuseReduction},
      {"aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", kFamily, fuseReduction},
      {"aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", kFamily, fuseWithDims<1>},
      {"aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", kFamily, fuseWithShape},
      {"aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", kFamily, fuseWithShape},
      {"aten::size.int(Tensor self, int dim) -> int", kFamily, fuseSizeOfDim},
      {"aten::size(Tensor self) -> int[]", kFamily, fuseSizes},
      {"aten::dim(Tensor self) -> int", kFamily, fuseDim},
      {"aten::len.Tensor(Tensor t) -> int", kFamily, fuseLength},
      {"aten::numel(Tensor self) -> int", kFamily, fuseNumel},
      {"prim::dtype(Tensor a) -> int", kFamily, fuseMemberInvariant},
      {"prim::device(Tensor a) -> Device", kFamily, fuseMemberInvariant},
      {"aten::is_floating_point(Tensor self) -> bool", kFamily, fuseMemberInvariant},
  };
}

}  // namespace hfta
