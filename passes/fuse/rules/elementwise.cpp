// Element-wise ops act on each element alone, so they act on each member
// alone: the op runs once on the [B, ...] array, or on the channel-folded
// value as it is (two folded operands too: they are laid out alike). Binary
// ops on member-leading operands first line up
// the operands' member dims (hfta::align), so that a member's [F] bias
// broadcasts against its [N, F] activations as it did alone:
//
//   %z = aten::add(%x, %bias, %alpha)   ->  %a = hfta::align(%x, %bias)
//        x: [N, F], bias: [F]                %c = hfta::align(%bias, %x)   # [B, 1, F]
//                                            %z = aten::add(%a, %c, %alpha)
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

bool bothFolded(const RuleContext& ctx) { return ctx.kind(0) == ValueKind::Folded && ctx.kind(1) == ValueKind::Folded; }

RuleResult fuseBinary(RuleContext& ctx) {
  if (!ctx.uniformFrom(2)) return RuleResult::decline("a scalar argument differs per member");
  if (bothFolded(ctx)) {
    ctx.bindOutputsByType(ctx.insertCopy({}), ValueKind::Folded);
    return RuleResult::fused();
  }
  auto* a = ctx.arrayOrBroadcast(0);
  auto* b = ctx.arrayOrBroadcast(1);
  auto* aligned_a = ctx.insert(kind::align(), {a, b});
  auto* aligned_b = ctx.insert(kind::align(), {b, a});
  ctx.bindOutputsByType(ctx.insertCopy({{0, aligned_a}, {1, aligned_b}}));
  return RuleResult::fused();
}

// x.new_zeros(size) and its kin read only x's dtype and device, the same
// in every member (and in any layout): one tensor serves all members.
//
//   %t = aten::new_zeros(%x, %size, ...)  ->  %t = aten::new_zeros(%x, %size, ...)   # Uniform
RuleResult fuseNewTensor(RuleContext& ctx) {
  if (ctx.kind(0) == ValueKind::PerMember) return RuleResult::decline("the tensor is not one value");
  if (!ctx.uniformFrom(1)) return RuleResult::decline("the size or fill value differs per member");
  ctx.bindOutput(0, ctx.insertCopy({})->output(), ValueKind::Uniform);
  return RuleResult::fused();
}

}  // namespace

// self.op_(other): self must already be per-member (it is written). A
// folded self with a member-leading other is written through its Array
// view, and stays folded.
RuleResult fuseBinaryInPlace(RuleContext& ctx) {
  if (!isPerMemberTensor(ctx.kind(0))) {
    return RuleResult::decline("writes per-member values into a tensor all members share");
  }
  if (!ctx.uniformFrom(2)) return RuleResult::decline("a scalar argument differs per member");
  if (bothFolded(ctx)) {
    ctx.bindOutputsByType(ctx.insertCopy({}), ValueKind::Folded);
    return RuleResult::fused();
  }
  auto* self = ctx.array(0);
  auto* other = ctx.insert(kind::align(), {ctx.arrayOrBroadcast(1), self});
  auto* copy = ctx.insertCopy({{0, self}, {1, other}});
  if (ctx.kind(0) == ValueKind::Folded) {
    ctx.bindOutput(0, ctx.input(0).value, ValueKind::Folded);
  } else {
    ctx.bindOutputsByType(copy);
  }
  return RuleResult::fused();
}

RuleResult fusePerElement(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("a scalar argument differs per member");
  if (ctx.kind(0) == ValueKind::Folded) {
    ctx.bindOutputsByType(ctx.insertCopy({}), ValueKind::Folded);
  } else {
    ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}}));
  }
  return RuleResult::fused();
}

RuleResult fusePerElementInPlace(RuleContext& ctx) {
  if (!isPerMemberTensor(ctx.kind(0))) {
    return RuleResult::decline("writes per-member values into a tensor all members share");
  }
  return fusePerElement(ctx);
}

namespace {

// A clone keeps each element. Channels-last formats name the member's
// rank, which a folded value has and a member-leading array has not.
RuleResult fuseClone(RuleContext& ctx) {
  if (ctx.kind(0) == ValueKind::Array && !ctx.input(1).value->mustBeNone()) {
    const auto format = torch::jit::constant_as<int64_t>(ctx.input(1).value);
    const bool any_rank = format && (*format == static_cast<int64_t>(c10::MemoryFormat::Contiguous) ||
                                     *format == static_cast<int64_t>(c10::MemoryFormat::Preserve));
    if (!any_rank) return RuleResult::decline("a channels-last clone of a member-leading array");
  }
  return fusePerElement(ctx);
}

}  // namespace

std::vector<Rule> rules::elementwise() {
  return {
      // Activations.
      {"aten::relu(Tensor self) -> Tensor", fusePerElement},
      {"aten::relu_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor", fusePerElement},
      {"aten::tanh(Tensor self) -> Tensor", fusePerElement},
      {"aten::tanh_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::sigmoid(Tensor self) -> Tensor", fusePerElement},
      {"aten::sigmoid_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::silu(Tensor self) -> Tensor", fusePerElement},
      {"aten::silu_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", fusePerElement},
      {"aten::leaky_relu_(Tensor(a!) self, Scalar negative_slope=0.01) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", fusePerElement},
      {"aten::elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", fusePerElement},
      {"aten::elu_(Tensor(a!) self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor(a!)",
       fusePerElementInPlace},
      {"aten::relu6(Tensor self) -> Tensor", fusePerElement},
      {"aten::relu6_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::hardswish(Tensor self) -> Tensor", fusePerElement},
      {"aten::hardswish_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::hardsigmoid(Tensor self) -> Tensor", fusePerElement},
      {"aten::hardsigmoid_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", fusePerElement},
      {"aten::hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", fusePerElement},
      {"aten::clamp_min(Tensor self, Scalar min) -> Tensor", fusePerElement},
      {"aten::zero_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", fuseClone},
      // x.detach() (torch.export records it where a scripted model has it).
      {"aten::detach(Tensor(a) self) -> Tensor(a)", fusePerElement},
      {"aten::hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor", fusePerElement},
      {"aten::softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", fusePerElement},
      {"aten::log_sigmoid(Tensor self) -> Tensor", fusePerElement},
      // In training, rrelu draws a slope per element: each member its own.
      {"aten::rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False, "
       "Generator? generator=None) -> Tensor",
       fusePerElement},
      {"aten::rrelu_(Tensor(a!) self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False, "
       "Generator? generator=None) -> Tensor(a!)",
       fusePerElementInPlace},
      {"aten::selu(Tensor self) -> Tensor", fusePerElement},
      {"aten::selu_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::celu(Tensor self, Scalar alpha=1.) -> Tensor", fusePerElement},
      {"aten::celu_(Tensor(a!) self, Scalar alpha=1.) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::mish(Tensor self) -> Tensor", fusePerElement},
      {"aten::mish_(Tensor(a!) self) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", fusePerElement},
      {"aten::threshold_(Tensor(a!) self, Scalar threshold, Scalar value) -> Tensor(a!)", fusePerElementInPlace},
      // Math.
      {"aten::abs(Tensor self) -> Tensor", fusePerElement},
      {"aten::sqrt(Tensor self) -> Tensor", fusePerElement},
      {"aten::rsqrt(Tensor self) -> Tensor", fusePerElement},
      {"aten::erf(Tensor self) -> Tensor", fusePerElement},
      {"aten::log(Tensor self) -> Tensor", fusePerElement},
      {"aten::square(Tensor self) -> Tensor", fusePerElement},
      // Comparisons and masks.
      {"aten::eq.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::ne.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::lt.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::le.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::gt.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::ge.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::eq.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::ne.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::lt.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::le.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::gt.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::ge.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::logical_not(Tensor self) -> Tensor", fusePerElement},
      {"aten::logical_and(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::logical_or(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::__or__.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      // masked_fill broadcasts self and mask like a binary op; the fill
      // value is the same in every member.
      {"aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", fuseBinary},
      {"aten::masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", fuseBinary},
      {"aten::masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", fuseBinaryInPlace},
      {"aten::masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", fuseBinaryInPlace},
      // Tensors like a per-member one are per member.
      {"aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      {"aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      {"aten::empty_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      {"aten::new_empty(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? "
       "device=None, bool? pin_memory=None) -> Tensor",
       fuseNewTensor},
      {"aten::new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? "
       "device=None, bool? pin_memory=None) -> Tensor",
       fuseNewTensor},
      {"aten::new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? "
       "device=None, bool? pin_memory=None) -> Tensor",
       fuseNewTensor},
      {"aten::new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
       "Device? device=None, bool? pin_memory=None) -> Tensor",
       fuseNewTensor},
      {"aten::full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? "
       "device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      // Casts.
      {"aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? "
       "memory_format=None) -> Tensor(a)",
       fusePerElement},
      {"aten::to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
       "bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> "
       "Tensor(a)",
       fusePerElement},
      // Arithmetic with a scalar.
      {"aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", fusePerElement},
      {"aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", fusePerElement},
      {"aten::rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", fusePerElement},
      {"aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::div.Scalar(Tensor self, Scalar other) -> Tensor", fusePerElement},
      {"aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", fusePerElement},
      {"aten::neg(Tensor self) -> Tensor", fusePerElement},
      {"aten::exp(Tensor self) -> Tensor", fusePerElement},
      {"aten::add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", fusePerElementInPlace},
      {"aten::div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)", fusePerElementInPlace},
      // Arithmetic between tensors.
      {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", fuseBinary},
      {"aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", fuseBinary},
      {"aten::mul.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::div.Tensor(Tensor self, Tensor other) -> Tensor", fuseBinary},
      {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", fuseBinaryInPlace},
      {"aten::sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", fuseBinaryInPlace},
      {"aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", fuseBinaryInPlace},
      {"aten::div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", fuseBinaryInPlace},
  };
}

}  // namespace hfta
