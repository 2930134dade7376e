// Convolutions: B members' convolutions become one grouped convolution over
// the channel-folded input (hfta::conv folds [B, N, C, *] into [N, B*C, *]).
// A shared input feeds one dense convolution with B*C_out channels instead.
//
//   %y = aten::conv2d(%x, %w, %b, %stride, %pad, %dil, %groups)
//     ->  %y = hfta::conv(%x, %w, %b, %stride, %pad, %dil, %groups)
#include "passes/rules/rules.h"

namespace hfta {
namespace {

const c10::Symbol kConv = c10::Symbol::fromQualString("hfta::conv");
const c10::Symbol kConvPadding = c10::Symbol::fromQualString("hfta::conv_padding");

template <bool StringPadding>
RuleResult fuseConv(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Array) {
    return RuleResult::decline("the weight is shared by all members, not one per member");
  }
  if (!ctx.uniformFrom(3)) return RuleResult::decline("a convolution setting differs per member");
  if (ctx.kind(2) == ValueKind::PerMember) return RuleResult::decline("the bias is not a tensor");
  auto* bias = ctx.kind(2) == ValueKind::Uniform && ctx.input(2).value->mustBeNone()
                   ? ctx.uniform(2)
                   : ctx.array(2);
  auto* y = ctx.insert(StringPadding ? kConvPadding : kConv,
                       {ctx.arrayOrBroadcast(0), ctx.array(1), bias, ctx.uniform(3), ctx.uniform(4),
                        ctx.uniform(5), ctx.uniform(6)});
  ctx.bindOutput(0, y, ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<RuleEntry> convRules() {
  return {
      {"aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], SymInt[1] padding=[0], SymInt[1] dilation=[1], SymInt groups=1) -> Tensor",
       "conv", fuseConv<false>},
      {"aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0], SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor",
       "conv", fuseConv<false>},
      {"aten::conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], str padding=\"valid\", SymInt[1] dilation=[1], SymInt groups=1) -> Tensor",
       "conv", fuseConv<true>},
      {"aten::conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], str padding=\"valid\", SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor",
       "conv", fuseConv<true>},
  };
}

}  // namespace hfta
