// Linear layers and matrix products: B members' products become one batched
// GEMM (hfta::linear / hfta::matmul lower to bmm, baddbmm or a broadcast
// matmul when the input is shared).
//
//   %y = aten::linear(%x, %w, %b)        ->  %y = hfta::linear(%x, %w, %b)
//        x: [N, in], w: [out, in]             x: [B, N, in] (or [1, N, in]),
//                                             w: [B, out, in], b: [B, out]
#include "passes/fuse/rules/rules.h"

namespace hfta {
namespace {

const c10::Symbol kLinear = c10::Symbol::fromQualString("hfta::linear");
const c10::Symbol kMatmul = c10::Symbol::fromQualString("hfta::matmul");
const c10::Symbol kAddmm = c10::Symbol::fromQualString("hfta::addmm");
const c10::Symbol kBaddbmm = c10::Symbol::fromQualString("hfta::baddbmm");
const c10::Symbol kTranspose = c10::Symbol::fromQualString("hfta::t");

RuleResult fuseLinear(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Array) {
    return RuleResult::decline("the weight is shared by all members, not one per member");
  }
  if (ctx.kind(2) == ValueKind::PerMember) return RuleResult::decline("the bias is not a tensor");
  ctx.bindOutput(0, ctx.insert(kLinear, {ctx.arrayOrBroadcast(0), ctx.array(1), ctx.arrayOrNone(2)}), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseMatmul(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.insert(kMatmul, {ctx.arrayOrBroadcast(0), ctx.arrayOrBroadcast(1)}), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseAddmm(RuleContext& ctx) {
  ctx.bindOutput(0,
                 ctx.insert(kAddmm, {ctx.arrayOrBroadcast(0), ctx.arrayOrBroadcast(1), ctx.arrayOrBroadcast(2)},
                            {{"beta", ctx.uniform(3)}, {"alpha", ctx.uniform(4)}}),
                 ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseBaddbmm(RuleContext& ctx) { return fuseAsMemberOp(ctx, kBaddbmm, {0, 1, 2}); }

RuleResult fuseTranspose(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.insert(kTranspose, {ctx.array(0)}), ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> linearRules() {
  return {
      {"aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", "linear", fuseLinear},
      {"aten::matmul(Tensor self, Tensor other) -> Tensor", "linear", fuseMatmul},
      {"aten::mm(Tensor self, Tensor mat2) -> Tensor", "linear", fuseMatmul},
      {"aten::bmm(Tensor self, Tensor mat2) -> Tensor", "linear", fuseMatmul},
      {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", "linear",
       fuseAddmm},
      {"aten::baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", "linear",
       fuseBaddbmm},
      {"aten::t(Tensor(a) self) -> Tensor(a)", "linear", fuseTranspose},
  };
}

}  // namespace hfta
