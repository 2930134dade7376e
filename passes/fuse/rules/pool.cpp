// Ops that treat every (sample, channel) alone — pooling (1-D, 2-D, 3-D),
// padding, channel dropout — run as they are on a channel-folded value
// [N, B*C, *] and keep it folded. A member-leading value [B, N, ...] instead runs with the
// members folded into the batch dim: viewed [B*N, ...], the op, then
// unfolded. Either way channel dropout draws a mask per (sample, member,
// channel).
//
//   %y = aten::max_pool2d(%x, ...)  ->  %y = aten::max_pool2d(%x, ...)      # x Folded
//   %y = aten::max_pool2d(%x, ...)  ->  %f = aten::flatten(%x, 0, 1)        # x Array
//                                        %p = aten::max_pool2d(%f, ...)
//                                        %y = aten::unflatten(%p, 0, [B, -1])
#include "passes/fuse/rules/rules.h"

namespace hfta {
namespace {

// [B, N, ...] -> [B*N, ...], the op, then back.
RuleResult fuseMembersInBatch(RuleContext& ctx) {
  auto& g = ctx.graph();
  auto* folded = ctx.insert(c10::aten::flatten, {ctx.array(0), 0, 1});
  auto* copy = ctx.insertCopy({{0, folded}});
  auto* sizes = g.insertConstant(std::vector<int64_t>{ctx.arraySize(), -1});
  for (size_t i = 0; i < copy->outputs().size(); ++i) {
    auto* unfolded = ctx.insert(c10::Symbol::fromQualString("aten::unflatten"), {copy->output(i), 0, sizes});
    ctx.bindOutput(i, unfolded, ValueKind::Array);
  }
  return RuleResult::fused();
}

}  // namespace

RuleResult fuseChannelwise(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
  if (ctx.kind(0) == ValueKind::Folded) {
    ctx.bindOutputsByType(ctx.insertCopy({}), ValueKind::Folded);
    return RuleResult::fused();
  }
  return fuseMembersInBatch(ctx);
}

namespace {

// Padding modes other than "constant" pad the spatial dims only; a constant
// pad may reach the channel dim, so it runs member-leading.
RuleResult fusePad(RuleContext& ctx) {
  const auto mode = torch::jit::constant_as<std::string>(ctx.input(2).value);
  if (ctx.kind(0) == ValueKind::Folded && (!mode || *mode == "constant")) {
    if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
    return fuseMembersInBatch(ctx);
  }
  return fuseChannelwise(ctx);
}

// In-place channel dropout writes its input: only a folded value, which it
// can write as it is (the member-leading form would write a folded copy).
RuleResult fuseChannelDropoutInPlace(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Folded) {
    return RuleResult::decline("in-place channel dropout of a value that is not channel-folded");
  }
  return fuseChannelwise(ctx);
}

}  // namespace

std::vector<Rule> rules::pool() {
  return {
      {"aten::max_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], int[1] dilation=[1], "
       "bool ceil_mode=False) -> Tensor",
       fuseChannelwise},
      {"aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool "
       "ceil_mode=False) -> Tensor",
       fuseChannelwise},
      {"aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] "
       "dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
       fuseChannelwise},
      {"aten::max_pool1d_with_indices(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], int[1] "
       "dilation=[1], bool ceil_mode=False) -> (Tensor, Tensor)",
       fuseChannelwise},
      {"aten::max_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool "
       "ceil_mode=False) -> Tensor",
       fuseChannelwise},
      {"aten::max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] "
       "dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
       fuseChannelwise},
      {"aten::avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False, "
       "bool count_include_pad=True) -> Tensor",
       fuseChannelwise},
      {"aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
       "bool count_include_pad=True, int? divisor_override=None) -> Tensor",
       fuseChannelwise},
      {"aten::avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False, "
       "bool count_include_pad=True, int? divisor_override=None) -> Tensor",
       fuseChannelwise},
      {"aten::adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor", fuseChannelwise},
      {"aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", fuseChannelwise},
      {"aten::adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor", fuseChannelwise},
      {"aten::adaptive_max_pool1d(Tensor self, int[1] output_size) -> (Tensor, Tensor)", fuseChannelwise},
      {"aten::adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)", fuseChannelwise},
      {"aten::adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)", fuseChannelwise},
      {"aten::pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor", fusePad},
      {"aten::feature_dropout(Tensor input, float p, bool train) -> Tensor", fuseChannelwise},
      {"aten::feature_dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)", fuseChannelDropoutInPlace},
  };
}

}  // namespace hfta
