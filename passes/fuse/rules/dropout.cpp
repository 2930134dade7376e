// Dropout draws one mask element per tensor element, so on the [B, ...]
// array (or the channel-folded [N, B*C, ...] value) every member gets its
// own mask: it fuses as an element-wise op. A shared (uniform) input is
// expanded to B members first so that members do not share a mask. The
// fused op is hfta::dropout: on the CPU a counter-based generator, eight
// to nine times as fast as ATen's dropout in forward and four to five
// times with backward (runtime/ops/dropout_ops.cpp, bench/dropout.py);
// elsewhere ATen's dropout. In-place dropout stays ATen's. (Channel
// dropout is in rules/pool.cpp.)
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

RuleResult fuseDropout(RuleContext& ctx) {
  if (!ctx.uniformFrom(1)) return RuleResult::decline("a scalar argument differs per member");
  const bool folded = ctx.kind(0) == ValueKind::Folded;
  auto* input = folded ? ctx.input(0).value : ctx.array(0);
  ctx.bindOutput(0, ctx.insert(kind::dropout(), {input, ctx.uniform(1), ctx.uniform(2)}),
                 folded ? ValueKind::Folded : ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<Rule> rules::dropout() {
  return {
      {"aten::dropout(Tensor input, float p, bool train) -> Tensor", fuseDropout},
      {"aten::dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)", fusePerElementInPlace},
  };
}

}  // namespace hfta
