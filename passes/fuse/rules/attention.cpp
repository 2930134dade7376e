// Attention. scaled_dot_product_attention runs once for all members, the
// members folded into the batch dim ([B, N, H, L, D] -> [B*N, H, L, D]),
// so the fast fused kernels see one big batch; a mask is shared or per
// member, dropout draws each member's own mask:
//
//   %o = aten::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %causal, %scale, %gqa)
//     ->  %o = hfta::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %causal, %scale, %gqa)
//
// PyTorch's inference fast paths (nn.TransformerEncoderLayer's
// _transformer_encoder_layer_fwd, nn.MultiheadAttention's
// _native_multi_head_attention) are chosen by conditions on training,
// grad mode, dtypes and devices, which are the same in every member, so the
// fused graph takes the same path for all; there they run as hfta ops that
// compute the same function from the stacked weights.
//
// nn.TransformerEncoder's nested-tensor path (eval, a key padding mask)
// packs each sequence to its own length, a layout a stacked array does not
// have. Its check that the padding is left-aligned answers False in the
// fused graph, so every member takes the padded path, which computes the
// same function on the unpadded positions (the padded positions' outputs,
// zeros in the nested path, are those of the padded path). With
// mask_check=False the encoder would skip that check: the fused graph then
// stops with a message saying so.
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

RuleResult fuseAttention(RuleContext& ctx) {
  return fuseAsMemberOp(ctx, kind::scaled_dot_product_attention(),
                        {/*query=*/0, /*key=*/1, /*value=*/2, /*attn_mask=*/3});
}

RuleResult fuseEncoderLayer(RuleContext& ctx) {
  return fuseAsMemberOp(ctx, kind::transformer_encoder_layer_fwd(), {/*src=*/0, /*mask=*/18});
}

RuleResult fuseMultiHeadAttention(RuleContext& ctx) {
  return fuseAsMemberOp(ctx, kind::native_multi_head_attention(), {/*query=*/0, /*key=*/1, /*value=*/2, /*mask=*/9});
}

RuleResult answerNotLeftAligned(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.graph().insertConstant(false), ValueKind::Uniform);
  return RuleResult::fused();
}

RuleResult refuseNestedTensor(RuleContext& ctx) {
  auto& g = ctx.graph();
  auto* message = g.insertConstant(
      "hfta: a fused nn.TransformerEncoder cannot convert its input to nested tensors (eval mode with a key padding "
      "mask and mask_check=False): build the members' encoders with mask_check=True (the default) or "
      "enable_nested_tensor=False");
  g.insertNode(g.create(c10::prim::RaiseException, {message, g.insertConstant(c10::IValue())}, 0));
  ctx.bindOutput(0, ctx.array(0), ValueKind::Array);
  return RuleResult::fused();
}

// Only reached after refuseNestedTensor's exception: the value is padded.
RuleResult keepPadded(RuleContext& ctx) {
  ctx.bindOutput(0, ctx.array(0), ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<Rule> rules::attention() {
  return {
      {"aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float "
       "dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
       fuseAttention},
      {"aten::_transformer_encoder_layer_fwd(Tensor src, int embed_dim, int num_heads, Tensor qkv_weight, Tensor "
       "qkv_bias, Tensor proj_weight, Tensor proj_bias, bool use_gelu, bool norm_first, float eps, Tensor "
       "norm_weight_1, Tensor norm_bias_1, Tensor norm_weight_2, Tensor norm_bias_2, Tensor ffn_weight_1, Tensor "
       "ffn_bias_1, Tensor ffn_weight_2, Tensor ffn_bias_2, Tensor? mask=None, int? mask_type=None) -> Tensor",
       fuseEncoderLayer},
      {"aten::_native_multi_head_attention(Tensor query, Tensor key, Tensor value, int embed_dim, int num_head, Tensor "
       "qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, Tensor? mask=None, bool need_weights=True, "
       "bool average_attn_weights=True, int? mask_type=None) -> (Tensor, Tensor)",
       fuseMultiHeadAttention},
      {"aten::_nested_tensor_from_mask_left_aligned(Tensor t, Tensor mask) -> bool", answerNotLeftAligned},
      {"aten::_nested_tensor_from_mask(Tensor t, Tensor mask, bool mask_check=True) -> Tensor", refuseNestedTensor},
      {"aten::to_padded_tensor(Tensor self, float padding, SymInt[]? output_size=None) -> Tensor", keepPadded},
  };
}

}  // namespace hfta
