// Dropout draws one mask element per tensor element, so on the [B, ...]
// array every member gets its own mask. A shared (uniform) input is
// expanded to B members first so that members do not share a mask.
#include "passes/rules/rules.h"

namespace hfta {
namespace {

RuleResult fuseDropout(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("the dropout probability or mode differs per member");
  ctx.bindOutputsByType(ctx.insertCopy({{0, ctx.array(0)}}));
  return RuleResult::fused();
}

RuleResult fuseDropoutInPlace(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array) {
    return RuleResult::decline("in-place dropout on a tensor all members share");
  }
  return fuseDropout(ctx);
}

}  // namespace

std::vector<RuleEntry> dropoutRules() {
  return {
      {"aten::dropout(Tensor input, float p, bool train) -> Tensor", "dropout", fuseDropout},
      {"aten::dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)", "dropout", fuseDropoutInPlace},
  };
}

}  // namespace hfta
