// Ops that treat every (sample, channel) alone — pooling, padding, channel
// dropout — run once on the members folded into the batch dim: [B, N, ...]
// viewed [B*N, ...], the op, then unfolded. For channel dropout this draws a
// mask per (sample, member, channel).
//
//   %y = aten::max_pool2d(%x, ...)  ->  %f = aten::flatten(%x, 0, 1)
//                                        %p = aten::max_pool2d(%f, ...)
//                                        %y = aten::unflatten(%p, 0, [B, -1])
#include "passes/rules/rules.h"

namespace hfta {
namespace {

RuleResult fuseFoldedIntoBatch(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("an argument differs per member");
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

std::vector<RuleEntry> poolRules() {
  constexpr const char* kFamily = "pool";
  return {
      {"aten::max_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], int[1] dilation=[1], bool ceil_mode=False) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", kFamily, fuseFoldedIntoBatch},
      {"aten::avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False, bool count_include_pad=True) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)", kFamily, fuseFoldedIntoBatch},
      {"aten::pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor", kFamily, fuseFoldedIntoBatch},
      {"aten::feature_dropout(Tensor input, float p, bool train) -> Tensor", kFamily, fuseFoldedIntoBatch},
  };
}

}  // namespace hfta
