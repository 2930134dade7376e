// Linear layers and matrix products: B members' products become one batched
// GEMM (hfta::linear / hfta::matmul lower to bmm, baddbmm or a broadcast
// matmul when the input is shared).
//
//   %y = aten::linear(%x, %w, %b)        ->  %y = hfta::linear(%x, %w, %b)
//        x: [N, in], w: [out, in]             x: [B, N, in] (or [1, N, in]),
//                                             w: [B, out, in], b: [B, out]
#include <algorithm>
#include <optional>
#include <string>

#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

RuleResult fuseLinear(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Array) {
    return RuleResult::decline("the weight is shared by all members, not one per member");
  }
  if (ctx.kind(2) == ValueKind::PerMember) return RuleResult::decline("the bias is not a tensor");
  ctx.bindOutput(0, ctx.insert(kind::linear(), {ctx.arrayOrBroadcast(0), ctx.array(1), ctx.arrayOrNone(2)}),
                 ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseMatmul(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.insert(kind::matmul(), {ctx.arrayOrBroadcast(0), ctx.arrayOrBroadcast(1)}), ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseAddmm(RuleContext& ctx) {
  ctx.bindOutput(0,
                 ctx.insert(kind::addmm(), {ctx.arrayOrBroadcast(0), ctx.arrayOrBroadcast(1), ctx.arrayOrBroadcast(2)},
                            {{"beta", ctx.uniform(3)}, {"alpha", ctx.uniform(4)}}),
                 ValueKind::Array);
  return RuleResult::fused();
}

RuleResult fuseBaddbmm(RuleContext& ctx) { return fuseAsMemberOp(ctx, kind::baddbmm(), {0, 1, 2}); }

// The equation with `letter` in front of every operand's and the output's
// subscripts, or nullopt where the output is implicit (its letters sorted,
// which the new one would reorder).
std::optional<std::string> withBatchLetter(const std::string& equation, char letter) {
  const auto arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find("->", arrow + 2) != std::string::npos) return std::nullopt;
  auto trimmed = [](const std::string& s) {
    const auto first = s.find_first_not_of(' ');
    return first == std::string::npos ? std::string() : s.substr(first, s.find_last_not_of(' ') - first + 1);
  };
  std::string out;
  size_t start = 0;
  while (true) {
    const auto comma = equation.find(',', start);
    const auto end = std::min(comma, arrow);
    out += letter + trimmed(equation.substr(start, end - start));
    if (comma == std::string::npos || comma > arrow) break;
    out += ',';
    start = comma + 1;
  }
  return out + "->" + letter + trimmed(equation.substr(arrow + 2));
}

// einsum over members: every operand is [B, ...] (a shared one an expand
// view) and the equation gains a batch letter that no subscript uses.
//
//   %y = aten::einsum("bhij,bhjd->bhid", %qk)  ->  %y = aten::einsum("Abhij,Abhjd->Abhid", %qk)
RuleResult fuseEinsum(RuleContext& ctx) {
  const auto equation = torch::jit::constant_as<std::string>(ctx.input(0).value);
  if (!equation) return RuleResult::decline("the equation is not a constant");
  if (ctx.kind(1) != ValueKind::Array) return RuleResult::decline("the operands are not a list of tensors");
  if (!ctx.uniformFrom(2)) return RuleResult::decline("the contraction path differs per member");
  const std::string letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const auto unused =
      std::find_if(letters.begin(), letters.end(), [&](char c) { return equation->find(c) == std::string::npos; });
  if (unused == letters.end()) return RuleResult::decline("the equation uses every letter");
  const auto fused_equation = withBatchLetter(*equation, *unused);
  if (!fused_equation) return RuleResult::decline("the output's subscripts are implicit (no ->)");
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.graph().insertConstant(*fused_equation)}, {1, ctx.array(1)}}));
  return RuleResult::fused();
}

RuleResult fuseTranspose(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.insert(kind::t(), {ctx.array(0)}), ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<Rule> rules::linear() {
  return {
      {"aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", fuseLinear},
      {"aten::matmul(Tensor self, Tensor other) -> Tensor", fuseMatmul},
      {"aten::mm(Tensor self, Tensor mat2) -> Tensor", fuseMatmul},
      {"aten::bmm(Tensor self, Tensor mat2) -> Tensor", fuseMatmul},
      {"aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", fuseAddmm},
      {"aten::baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
       fuseBaddbmm},
      {"aten::t(Tensor(a) self) -> Tensor(a)", fuseTranspose},
      {"aten::einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor", fuseEinsum},
  };
}

}  // namespace hfta
