// The Transformer ops per member: embedding lookups into stacked tables,
// layer norm with each member's affine parameters, attention with the
// members folded into the batch dimension (so the fast fused attention
// kernels run once for all members), and PyTorch's inference fast paths
// (_transformer_encoder_layer_fwd, _native_multi_head_attention) computed
// from those, for stacked weights.
#include <limits>

#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

// `t` ([B|1, *member]) viewed with singleton dims after the member dim so
// that its member rank is `member_rank`.
at::Tensor withMemberRank(const at::Tensor& t, int64_t member_rank) {
  auto shaped = t;
  while (shaped.dim() - 1 < member_rank) shaped = shaped.unsqueeze(1);
  return shaped;
}

// [B, N, ...] -> [B*N, ...]: the members folded into the member's batch dim.
at::Tensor foldIntoBatch(const at::Tensor& array, int64_t members) {
  return expand_members(array, members).flatten(0, 1);
}

// at::scaled_dot_product_attention, whose dropout on the CPU (ATen's math
// path, at::dropout on the attention weights) takes the runtime's dropout
// (dropout_ops.cpp): the math path without dropout gives the weights, and
// the product with the values is redone after dropping out. (The math path
// multiplies by the values once more, unused: a small matmul next to the
// softmax and the draws it saves.) Reduced precision keeps ATen's path,
// which computes in float there.
at::Tensor attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                     const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                     std::optional<double> scale, bool enable_gqa) {
  const auto type = query.scalar_type();
  if (dropout_p <= 0 || dropout_p >= 1 || !query.device().is_cpu() || (type != at::kFloat && type != at::kDouble)) {
    return at::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  }
  auto mask = attn_mask;
  if (mask.has_value() && mask->defined() && mask->scalar_type() == at::kBool) {
    // As scaled_dot_product_attention hands a boolean mask to its backends.
    mask = at::where(*mask, at::scalar_tensor(0.0, query.options()),
                     at::scalar_tensor(-std::numeric_limits<double>::infinity(), query.options()));
  }
  const auto weights = std::get<1>(
      at::_scaled_dot_product_attention_math(query, key, value, mask, 0.0, is_causal, std::nullopt, scale, enable_gqa));
  auto values = value;
  const int64_t heads = query.size(-3), value_heads = value.size(-3);
  if (enable_gqa && value_heads != heads) values = values.repeat_interleave(heads / value_heads, -3);
  return at::matmul(ops::dropout(weights, dropout_p, true), values);
}

// An attention mask for a member's [N, H, L, S] scores, as the fast paths
// take it: mask_type 0 is [L, S], 1 a key padding mask [N, S], 2 [N, H, L,
// S]; here with the member dim first ([B|1, ...]). Returns it folded to
// broadcast against [B*N, H, L, S], as scaled_dot_product_attention takes
// it: true where attended. The fast paths read any mask as true (or
// nonzero) where masked: ATen's masked_softmax turns a float mask into a
// bool one first, and so do we. Handing a float mask on as it is would also
// reach the CPU flash kernel with a mask dtype other than the queries'
// (float32 with float64 q/k/v), which scales and masks only part of each
// vector of keys (_scale_attn_mask_fusion_kernel<double, float>).
at::Tensor foldedAttentionMask(const at::Tensor& mask, int64_t mask_type, int64_t members, int64_t batch) {
  const auto sdpa_mask = mask.to(at::kBool).logical_not();
  at::Tensor shaped;
  switch (mask_type) {
    case 0:
      shaped = sdpa_mask.unsqueeze(1).unsqueeze(1);  // [B|1, 1, 1, L, S]
      break;
    case 1:
      shaped = sdpa_mask.unsqueeze(2).unsqueeze(2);  // [B|1, N, 1, 1, S]
      break;
    default:
      TORCH_CHECK(mask_type == 2, "hfta: unknown attention mask type ", mask_type);
      shaped = sdpa_mask;  // [B|1, N, H, L, S]
  }
  if (shaped.size(0) == 1 && shaped.size(1) == 1) return shaped.squeeze(0);  // one mask for every member and batch
  auto sizes = shaped.sizes().vec();
  sizes[0] = members;
  sizes[1] = batch;
  return shaped.expand(sizes).flatten(0, 1);
}

// Member b's row i of its table [V, D] is row b * V + i of the stacked
// table [B, V, D] viewed [B*V, D]: the ids [B|1, ...] offset so.
at::Tensor stackedRows(const at::Tensor& weight, const at::Tensor& indices) {
  const int64_t members = weight.size(0);
  std::vector<int64_t> offset_shape(indices.dim(), 1);
  offset_shape[0] = members;
  return indices + at::arange(members, indices.options()).mul_(weight.size(1)).view(offset_shape);
}

// Self-attention of the fast paths on x [B, N, L, E]: the packed
// projection, attention over [B*N, H, L, D], the output projection.
at::Tensor selfAttention(const at::Tensor& x, int64_t num_heads, const at::Tensor& qkv_weight,
                         const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
                         const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  const int64_t members = qkv_weight.size(0);
  const int64_t batch = x.size(1);
  const int64_t length = x.size(2);
  const int64_t embed = x.size(3);
  // [B, N, L, 3E] -> [3, B*N, H, L, D]
  auto qkv = hfta::ops::linear(x, qkv_weight, qkv_bias)
                 .unflatten(-1, {3, num_heads, embed / num_heads})
                 .permute({3, 0, 1, 4, 2, 5})
                 .flatten(1, 2);
  std::optional<at::Tensor> attn_mask;
  if (mask.has_value() && mask->defined()) {
    attn_mask = foldedAttentionMask(*mask, mask_type.value_or(2), members, batch);
  }
  auto out = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask);
  out = out.transpose(1, 2).reshape({members, batch, length, embed});
  return hfta::ops::linear(out, proj_weight, proj_bias);
}

}  // namespace

at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                     bool sparse) {
  TORCH_CHECK(weight.dim() == 3, "hfta::embedding: weight must be [B, V, D], got ", weight.sizes());
  TORCH_CHECK(!sparse,
              "hfta::embedding: sparse gradients (sparse=True) of a stacked embedding table are not supported; "
              "build the members' embeddings with sparse=False");
  const auto out =
      at::embedding(weight.flatten(0, 1), stackedRows(weight, indices), /*padding_idx=*/-1, scale_grad_by_freq, sparse);
  if (padding_idx < 0) return out;
  // Each member's padding row gets no gradient: where a member looks up
  // row padding_idx its output is the row's value, detached.
  const auto padding = (indices == padding_idx).unsqueeze(-1);
  return at::where(padding, out.detach(), out);
}

at::Tensor& embedding_renorm_(at::Tensor& weight, const at::Tensor& indices, double max_norm, double norm_type) {
  TORCH_CHECK(weight.dim() == 3, "hfta::embedding_renorm_: weight must be [B, V, D], got ", weight.sizes());
  auto flat = weight.view({-1, weight.size(2)});
  at::embedding_renorm_(flat, stackedRows(weight, indices).flatten(), max_norm, norm_type);
  return weight;
}

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps,
                      bool cudnn_enable) {
  // Normalization has no parameters: once over all members (or once for a
  // shared [1, ...] input); then each member's own scale and shift.
  const bool has_weight = weight.has_value() && weight->defined();
  const bool has_bias = bias.has_value() && bias->defined();
  // A lower-precision input with float32 parameters (autocast's bfloat16 or
  // float16 activations): as at::layer_norm, computed in the parameters'
  // dtype and rounded once to the input's.
  const auto param_dtype = has_weight ? weight->scalar_type() : has_bias ? bias->scalar_type() : input.scalar_type();
  const bool mixed = param_dtype != input.scalar_type() && at::isReducedFloatingType(input.scalar_type());
  auto y = at::layer_norm(mixed ? input.to(param_dtype) : input, normalized_shape, std::nullopt, std::nullopt, eps,
                          cudnn_enable);
  const int64_t rank = input.dim() - 1;
  if (has_weight && has_bias) {
    y = at::addcmul(withMemberRank(*bias, rank), y, withMemberRank(*weight, rank));
  } else if (has_weight) {
    y = y * withMemberRank(*weight, rank);
  } else if (has_bias) {
    y = y + withMemberRank(*bias, rank);
  }
  return mixed ? y.to(input.scalar_type()) : y;
}

at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                        const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                        std::optional<double> scale, bool enable_gqa) {
  const int64_t members = std::max({query.size(0), key.size(0), value.size(0)});
  const int64_t rank = query.dim() - 1;  // a member's [*batch, L, E]
  TORCH_CHECK(rank >= 2, "hfta::scaled_dot_product_attention: members' queries must be [..., L, E], got ",
              query.sizes());
  if (rank == 2) {
    // No batch dim in a member: the members are the batch.
    return attention(expand_members(query, members), expand_members(key, members), expand_members(value, members),
                     attn_mask, dropout_p, is_causal, scale, enable_gqa);
  }
  // Members folded into the first batch dim: [B, N, ...] -> [B*N, ...].
  const int64_t batch = std::max({query.size(1), key.size(1), value.size(1)});
  auto fold = [&](const at::Tensor& t) {
    auto sizes = t.sizes().vec();
    sizes[0] = members;
    sizes[1] = batch;
    return t.expand(sizes).flatten(0, 1);
  };
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) {
    const auto& m = *attn_mask;
    // A [1, ...] mask without the member's batch dim (or with a batch dim
    // of one) broadcasts as it is; any other is folded like the queries.
    if (m.size(0) == 1 && (m.dim() - 1 < rank || m.size(1) == 1)) {
      mask = m.squeeze(0);
    } else {
      mask = fold(withMemberRank(m, rank));
    }
  }
  auto out = attention(fold(query), fold(key), fold(value), mask, dropout_p, is_causal, scale, enable_gqa);
  return out.unflatten(0, {members, batch});
}

at::Tensor transformer_encoder_layer_fwd(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                         const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                         const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                                         bool norm_first, double eps, const at::Tensor& norm_weight_1,
                                         const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                                         const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                                         const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                                         const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                                         std::optional<int64_t> mask_type) {
  TORCH_CHECK(src.dim() == 4, "hfta::transformer_encoder_layer_fwd: src must be [B, N, L, E], got ", src.sizes());
  const auto x_in = expand_members(src, qkv_weight.size(0));
  const std::vector<int64_t> shape{embed_dim};
  auto norm1 = [&](const at::Tensor& t) {
    return hfta::ops::layer_norm(t, shape, norm_weight_1, norm_bias_1, eps, true);
  };
  auto norm2 = [&](const at::Tensor& t) {
    return hfta::ops::layer_norm(t, shape, norm_weight_2, norm_bias_2, eps, true);
  };
  auto attention = [&](const at::Tensor& t) {
    return selfAttention(t, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type);
  };
  auto feed_forward = [&](const at::Tensor& t) {
    auto h = hfta::ops::linear(t, ffn_weight_1, ffn_bias_1);
    return hfta::ops::linear(use_gelu ? at::gelu(h) : at::relu(h), ffn_weight_2, ffn_bias_2);
  };
  // Residuals added in place, as ATen's transformer_encoder_layer_forward
  // adds them: into the attention's and the feed-forward's outputs, in their
  // dtype (bfloat16 or float16 under autocast, with a float32 src).
  if (norm_first) {
    auto x = attention(norm1(x_in)).add_(x_in);
    return feed_forward(norm2(x)).add_(x);
  }
  auto x = norm1(attention(x_in).add_(x_in));
  return norm2(feed_forward(x).add_(x));
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  TORCH_CHECK(query.dim() == 4, "hfta::native_multi_head_attention: query must be [B, N, L, E], got ", query.sizes());
  const int64_t members = qkv_weight.size(0);
  const int64_t batch = query.size(1);
  const int64_t head_dim = embed_dim / num_head;
  // Each of q, k, v through its third of the packed projection.
  auto project = [&](const at::Tensor& t, int64_t part) {
    auto w = qkv_weight.narrow(1, part * embed_dim, embed_dim);
    auto b = qkv_bias.narrow(1, part * embed_dim, embed_dim);
    // [B, N, L, E] -> [B*N, H, L, D]
    return foldIntoBatch(hfta::ops::linear(t, w, b), members).unflatten(-1, {num_head, head_dim}).transpose(1, 2);
  };
  const auto q = project(query, 0);
  const auto k = project(key, 1);
  const auto v = project(value, 2);
  std::optional<at::Tensor> attn_mask;
  if (mask.has_value() && mask->defined()) {
    attn_mask = foldedAttentionMask(*mask, mask_type.value_or(2), members, batch);
  }
  at::Tensor out;
  at::Tensor weights;
  if (need_weights) {
    auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
    if (attn_mask) scores = scores.masked_fill(attn_mask->logical_not(), -std::numeric_limits<double>::infinity());
    weights = at::softmax(scores, -1);
    out = at::matmul(weights, v);
    weights = weights.unflatten(0, {members, batch});  // [B, N, H, L, S]
    if (average_attn_weights) weights = weights.mean(2);
  } else {
    out = at::scaled_dot_product_attention(q, k, v, attn_mask);
    weights = at::empty({members, 0}, query.options());
  }
  out = out.transpose(1, 2).flatten(2).unflatten(0, {members, batch});  // [B, N, L, E]
  return {hfta::ops::linear(out, proj_weight, proj_bias), weights};
}

at::Tensor expand(const at::Tensor& array, at::IntArrayRef size, bool implicit) {
  // New leading member dims go after the member dim.
  auto shaped = withMemberRank(array, static_cast<int64_t>(size.size()));
  std::vector<int64_t> sizes{shaped.size(0)};
  sizes.insert(sizes.end(), size.begin(), size.end());
  return shaped.expand(sizes, implicit);
}

std::vector<int64_t> member_dims(const at::Tensor& array) {
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < array.dim(); ++d) dims.push_back(d);
  return dims;
}

std::optional<at::Tensor> broadcast_optional_to_members(const std::optional<at::Tensor>& self, int64_t array_size) {
  if (!self.has_value() || !self->defined()) return std::nullopt;
  return broadcast_to_members(*self, array_size);
}

}  // namespace hfta::ops
