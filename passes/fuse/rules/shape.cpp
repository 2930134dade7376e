// Shape ops and metadata. In the member-leading layout a member dim d >= 0
// is dim d + 1 of the array (negative dims count from the end and stay), and
// a member shape s is [B] + s. In the channel-folded layout [N, B*C, *] a
// member dim d >= 2 is dim d as it is, so ops on those dims alone (a max or
// mean over points or pixels) keep the value folded. Metadata queries
// answer with the member's logical shape, so code that branches on shapes
// behaves as in one member:
//
//   %n = aten::size(%x, %c0)     ->  %n = aten::size(%x, %c1)
//   %d = aten::dim(%x)           ->  %e = aten::dim(%x); %d = aten::sub(%e, %c1)
//   %y = aten::view(%x, %shape)  ->  %s = aten::add(%cB, %shape); %y = aten::view(%x, %s)
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

// The array at input 0; the inputs at DimArgs are member dims; any other
// input must be uniform.
// True if every output of the node is a plain tensor (a list of folded
// values is not a layout this pass has).
bool tensorOutputs(const torch::jit::Node* node) {
  for (const auto* out : node->outputs()) {
    if (out->type()->kind() != c10::TypeKind::TensorType) return false;
  }
  return true;
}

// The op runs on the folded value as it is when its dims are past the
// channel dim.
bool keepFolded(RuleContext& ctx, const std::vector<size_t>& dims) {
  if (!tensorOutputs(ctx.node()) || !ctx.foldedWithSpatialDims(0, dims)) return false;
  ctx.bindOutputsByType(ctx.insertCopy({}), ValueKind::Folded);
  return true;
}

template <size_t... DimArgs>
RuleResult fuseWithDims(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  if (keepFolded(ctx, {DimArgs...})) return RuleResult::fused();
  std::unordered_map<size_t, torch::jit::Value*> replaced{{0, ctx.array(0)}};
  ((replaced[DimArgs] = ctx.stackedDim(DimArgs)), ...);
  ctx.bindOutputsByType(ctx.insertCopy(replaced));
  return RuleResult::fused();
}

// A reduction over member dims. Over all dims (None or []) it reduces over
// each member's own dims: the array's dims 1.. (hfta::member_dims).
RuleResult fuseReduction(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  const auto dims = constantInts(ctx.input(1).value);
  if (ctx.input(1).value->mustBeNone() || (dims && dims->empty())) {
    auto* array = ctx.array(0);
    ctx.bindOutputsByType(ctx.insertCopy({{0, array}, {1, ctx.insert(kind::member_dims(), {array})}}));
    return RuleResult::fused();
  }
  if (keepFolded(ctx, {1})) return RuleResult::fused();
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedDims(1)}}));
  return RuleResult::fused();
}

// A reduction of all of a member's dims to one value (x.sum(), x.all(),
// x.std()): the form of the op that takes dims, over the member dims.
RuleResult fuseFullReduction(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  auto* array = ctx.array(0);
  auto* dims = ctx.insert(kind::member_dims(), {array});
  auto* no_keepdim = ctx.graph().insertConstant(false);
  const auto kind = ctx.node()->kind();
  torch::jit::Value* reduced = nullptr;
  if (kind == c10::aten::sum || kind == c10::aten::mean) {
    reduced = ctx.insert(kind, {array, dims, no_keepdim}, {{"dtype", ctx.uniform(1)}});
  } else if (kind == c10::aten::std || kind == c10::aten::var) {
    reduced = ctx.insert(kind, {array, dims, ctx.uniform(1), no_keepdim});
  } else {  // all, any
    reduced = ctx.insert(kind, {array, dims, no_keepdim});
  }
  ctx.bindOutput(0, reduced, ValueKind::Array);
  return RuleResult::fused();
}

// expand(x, size): new leading member dims go after the member dim.
RuleResult fuseExpand(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("the size differs per member");
  ctx.bindOutput(0, ctx.insert(kind::expand(), {ctx.array(0), ctx.uniform(1), ctx.uniform(2)}), ValueKind::Array);
  return RuleResult::fused();
}

// flatten(x, start, end) with start >= 2 keeps a folded value folded (end
// is then past the channel dim too, even when negative).
RuleResult fuseFlatten(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  if (keepFolded(ctx, {1})) return RuleResult::fused();
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedDim(1)}, {2, ctx.stackedDim(2)}}));
  return RuleResult::fused();
}

// The same list of member dims, each moved past the member dim.
RuleResult fuseWithDimList(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  if (keepFolded(ctx, {1})) return RuleResult::fused();
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedDims(1)}}));
  return RuleResult::fused();
}

// permute(x, dims) -> permute(x, [0] + stacked dims).
RuleResult fusePermute(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the dims differ per member");
  torch::jit::Value* dims = nullptr;
  if (auto constant = constantInts(ctx.input(1).value)) {
    std::vector<int64_t> stacked{0};
    for (int64_t d : *constant) stacked.push_back(d >= 0 ? d + 1 : d);
    dims = ctx.graph().insertConstant(stacked);
  } else {
    dims = ctx.insert(c10::aten::add, {ctx.graph().insertConstant(std::vector<int64_t>{0}), ctx.stackedDims(1)});
  }
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, dims}}));
  return RuleResult::fused();
}

// view and reshape take [B] + shape. A folded value's member-leading view
// is strided, so where a member's view would need a contiguous tensor the
// fused graph reshapes (a view whenever one is possible, else a copy).
RuleResult fuseWithShape(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the shape differs per member");
  if (ctx.kind(0) == ValueKind::Folded) {
    ctx.bindOutput(0, ctx.insert(c10::aten::reshape, {ctx.array(0), ctx.stackedShape(1)}), ValueKind::Array);
    return RuleResult::fused();
  }
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedShape(1)}}));
  return RuleResult::fused();
}

// repeat with as many or more repeats than the member has dims.
RuleResult fuseRepeat(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the repeats differ per member");
  ctx.bindOutput(0, ctx.insert(kind::repeat(), {ctx.array(0), ctx.uniform(1)}), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseSizeOfDim(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform) return RuleResult::decline("the dim differs per member");
  // A folded value has the member's rank, batch size and spatial sizes.
  const auto dim = torch::jit::constant_as<int64_t>(ctx.input(1).value);
  if (ctx.kind(0) == ValueKind::Folded && dim && (*dim == 0 || *dim >= 2)) {
    ctx.bindOutput(0, ctx.insert(c10::aten::size, {ctx.input(0).value, *dim}), ValueKind::Uniform);
    return RuleResult::fused();
  }
  ctx.bindOutput(0, ctx.insert(c10::aten::size, {ctx.array(0), ctx.stackedDim(1)}), ValueKind::Uniform);
  return RuleResult::fused();
}

// A member's sizes (a uniform int list) of the tensor at input i.
torch::jit::Value* memberSizes(RuleContext& ctx, size_t i) {
  switch (ctx.kind(i)) {
    case ValueKind::Uniform:
      return ctx.insert(c10::aten::size, {ctx.uniform(i)});
    case ValueKind::Folded:
      return ctx.insert(kind::folded_member_sizes(), {ctx.input(i).value, ctx.arraySize()});
    default:
      break;
  }
  auto* sizes = ctx.insert(c10::aten::size, {ctx.array(i)});
  auto* none = ctx.graph().insertConstant(c10::IValue());
  return ctx.insert(c10::aten::slice, {sizes, 1, none, 1});
}

RuleResult fuseSizes(RuleContext& ctx) {
  ctx.bindOutput(0, memberSizes(ctx, 0), ValueKind::Uniform);
  return RuleResult::fused();
}

// expand_as(self, other): self expanded to other's member sizes. A shared
// self expands alike in every member and stays shared.
//
//   %y = aten::expand_as(%x, %o)  ->  %s = <o's member sizes>
//                                     %y = hfta::expand(%x, %s, %false)    # x Array
//                                     %y = aten::expand(%x, %s)            # x Uniform
RuleResult fuseExpandAs(RuleContext& ctx) {
  auto* sizes = memberSizes(ctx, 1);
  if (ctx.kind(0) == ValueKind::Uniform) {
    ctx.bindOutput(0, ctx.insert(c10::aten::expand, {ctx.uniform(0), sizes}), ValueKind::Uniform);
    return RuleResult::fused();
  }
  auto* no_implicit = ctx.graph().insertConstant(false);
  ctx.bindOutput(0, ctx.insert(kind::expand(), {ctx.array(0), sizes, no_implicit}), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseDim(RuleContext& ctx) {
  if (ctx.kind(0) == ValueKind::Folded) {
    ctx.bindOutput(0, ctx.insert(c10::aten::dim, {ctx.input(0).value}), ValueKind::Uniform);
    return RuleResult::fused();
  }
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

// An op over a constant, non-empty list of member dims at input DimsArg
// (roll's dims, norm's dim); the other inputs uniform. An empty list would
// mean every dim, the member dim with them, and is left to the fallback.
//
//   %y = aten::roll(%x, %shifts, [1, 2])  ->  %y = aten::roll(%x, %shifts, [2, 3])
template <size_t DimsArg>
RuleResult fuseOverDims(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  const auto dims = constantInts(ctx.input(DimsArg).value);
  if (!dims || dims->empty()) return RuleResult::decline("the dims are not a constant, non-empty list");
  if (keepFolded(ctx, {DimsArg})) return RuleResult::fused();
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {DimsArg, ctx.stackedDims(DimsArg)}}));
  return RuleResult::fused();
}

// Advanced indexing, x[i, j]: each member picks from its own slice with its
// own indices (or with indices all members share), in one gather.
//
//   %y = aten::index(%table, %indices)  ->  %y = hfta::index(%table, %indices, %shared)
//        table: [T, H], indices: [i]         table: [B, T, H], i: [B, N] (or [N], shared)
RuleResult fuseIndex(RuleContext& ctx) {
  if (ctx.kind(1) == ValueKind::PerMember) return RuleResult::decline("the indices are not one list of tensors");
  auto* shared = ctx.graph().insertConstant(ctx.kind(1) == ValueKind::Uniform);
  ctx.bindOutput(0, ctx.insert(kind::index(), {ctx.array(0), ctx.input(1).value, shared}), ValueKind::Array);
  return RuleResult::fused();
}

// x.gather(dim, index): each member gathers from its own slice with its
// own index (or one all members share, stacked).
//
//   %y = aten::gather(%x, %dim, %index)  ->  %y = aten::gather(%x, %dim + 1, %index)
//        x, index: [N, L]                      x, index: [B, N, L]
RuleResult fuseGather(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Uniform || ctx.kind(3) != ValueKind::Uniform) {
    return RuleResult::decline("the dim or sparse_grad differs per member");
  }
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}, {1, ctx.stackedDim(1)}, {2, ctx.array(2)}}));
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

std::vector<Rule> rules::shape() {
  return {
      {"aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", fuseFlatten},
      {"aten::unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", fuseWithDims<1>},
      {"aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", fuseWithDims<1>},
      {"aten::squeeze(Tensor(a) self) -> Tensor(a)", fuseWithDims<>},
      {"aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", fuseWithDims<1>},
      {"aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", fuseWithDimList},
      {"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", fuseWithDims<1, 2>},
      {"aten::swapaxes(Tensor(a) self, int axis0, int axis1) -> Tensor(a)", fuseWithDims<1, 2>},
      {"aten::swapdims(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", fuseWithDims<1, 2>},
      {"aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)", fusePermute},
      {"aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", fuseWithDims<1>},
      {"aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", fuseExpand},
      {"aten::expand_as(Tensor(a) self, Tensor other) -> Tensor(a)", fuseExpandAs},
      {"aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", fuseIndex},
      {"aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", fuseGather},
      {"aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> "
       "Tensor(a)",
       fuseWithDims<1>},
      {"aten::chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]", fuseWithDims<2>},
      {"aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", fuseWithDims<2>},
      {"aten::split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]", fuseWithDims<2>},
      {"aten::split(Tensor(a -> *) self, int[] split_sizes, int dim=0) -> Tensor(a)[]", fuseWithDims<2>},
      {"aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", fuseWithDims<2>},
      {"aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", fuseWithDims<1>},
      {"aten::repeat(Tensor self, SymInt[] repeats) -> Tensor", fuseRepeat},
      {"aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", fuseWithDims<1>},
      {"aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", fuseWithDims<1>},
      {"aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=0) -> Tensor(a)", fuseWithDims<>},
      {"aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       fuseReduction},
      {"aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       fuseReduction},
      {"aten::std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", fuseReduction},
      {"aten::var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", fuseReduction},
      {"aten::std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> "
       "Tensor",
       fuseReduction},
      {"aten::var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> "
       "Tensor",
       fuseReduction},
      {"aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", fuseFullReduction},
      {"aten::mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", fuseFullReduction},
      {"aten::std(Tensor self, bool unbiased=True) -> Tensor", fuseFullReduction},
      {"aten::var(Tensor self, bool unbiased=True) -> Tensor", fuseFullReduction},
      {"aten::all(Tensor self) -> Tensor", fuseFullReduction},
      {"aten::any(Tensor self) -> Tensor", fuseFullReduction},
      {"aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", fuseReduction},
      // F.normalize's norm (Swin V2's cosine attention).
      {"aten::norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor", fuseOverDims<2>},
      // ... as torch.export records it.
      {"aten::linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? "
       "dtype=None) -> Tensor",
       fuseOverDims<2>},
      // Swin's shifted windows.
      {"aten::roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", fuseOverDims<2>},
      {"aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", fuseWithDims<1>},
      {"aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", fuseWithShape},
      {"aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", fuseWithShape},
      {"aten::size.int(Tensor self, int dim) -> int", fuseSizeOfDim},
      {"aten::size(Tensor self) -> int[]", fuseSizes},
      {"aten::dim(Tensor self) -> int", fuseDim},
      {"aten::len.Tensor(Tensor t) -> int", fuseLength},
      {"aten::numel(Tensor self) -> int", fuseNumel},
      {"prim::dtype(Tensor a) -> int", fuseMemberInvariant},
      {"prim::device(Tensor a) -> Device", fuseMemberInvariant},
      {"aten::is_floating_point(Tensor self) -> bool", fuseMemberInvariant},
      {"prim::requires_grad(Tensor a) -> bool", fuseMemberInvariant},
      {"prim::is_nested(Tensor a) -> bool", fuseMemberInvariant},
      {"prim::is_cuda(Tensor a) -> bool", fuseMemberInvariant},
      {"prim::layout(Tensor a) -> Layout", fuseMemberInvariant},
  };
}

}  // namespace hfta
