// Embeddings: one lookup for all members in the stacked table [B, V, D]
// viewed as [B*V, D], member b's ids offset by b*V. Each member's
// padding_idx row gets no gradient (HFTA's version zeroed member 0's only);
// scale_grad_by_freq counts each member's ids alone, since offset ids of
// different members never coincide. max_norm renormalizes the looked-up
// rows in place, each member in its own slice (hfta::embedding_renorm_).
//
//   %y = aten::embedding(%w, %ids, %pad, %freq, %sparse)
//     ->  %y = hfta::embedding(%w : [B, V, D], %ids : [B|1, N, L], %pad, %freq, %sparse)
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

RuleResult fuseEmbedding(RuleContext& ctx) {
  constexpr size_t kSparse = 4;
  if (ctx.kind(0) != ValueKind::Array) return RuleResult::decline("the table is shared by all members");
  // (nn.Embedding reads sparse from an attribute: hfta::embedding refuses
  // it at run time.)
  auto sparse = torch::jit::constant_as<bool>(ctx.input(kSparse).value);
  if (sparse && *sparse) {
    return RuleResult::decline("sparse gradients (sparse=True) of a stacked table are not supported");
  }
  return fuseAsMemberOp(ctx, kind::embedding(), {/*indices=*/1});
}

RuleResult fuseEmbeddingRenorm(RuleContext& ctx) {
  if (ctx.kind(0) != ValueKind::Array) return RuleResult::decline("the table is shared by all members");
  return fuseAsMemberOp(ctx, kind::embedding_renorm_(), {/*indices=*/1});
}

}  // namespace

std::vector<Rule> rules::embedding() {
  return {
      {"aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool "
       "sparse=False) -> Tensor",
       fuseEmbedding},
      {"aten::embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> Tensor(a!)",
       fuseEmbeddingRenorm},
  };
}

}  // namespace hfta
