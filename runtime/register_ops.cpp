// The hfta:: operator schemas, declared once, and their composite kernels.
#include <torch/library.h>

#include "runtime/ops.h"

TORCH_LIBRARY(hfta, m) {
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  m.def("matmul(Tensor self, Tensor other) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("t(Tensor(a) self) -> Tensor(a)");
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> "
      "Tensor");
  m.def(
      "conv_padding(Tensor input, Tensor weight, Tensor? bias, int[] stride, str padding, int[] dilation, int groups) "
      "-> Tensor");
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] output_padding, "
      "int groups, int[] dilation) -> Tensor");
  m.def(
      "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, Tensor(b!)? running_var, bool "
      "training, float momentum, float eps, bool cudnn_enabled) -> Tensor");
  m.def(
      "batch_norm_momenta(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, Tensor(b!)? "
      "running_var, bool training, float[] momenta, float eps, bool cudnn_enabled) -> Tensor");
  m.def(
      "group_norm(Tensor input, int num_groups, Tensor? weight, Tensor? bias, float eps, bool cudnn_enabled, int "
      "array_size) -> Tensor");
  m.def(
      "instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, Tensor(b!)? running_var, "
      "bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor");
  m.def("fold_channels(Tensor array, int array_size) -> Tensor");
  m.def("unfold_channels(Tensor(a) folded, int array_size) -> Tensor(a)");
  m.def("repeat(Tensor array, int[] repeats) -> Tensor");
  m.def("index(Tensor array, Tensor?[] indices, bool shared_indices) -> Tensor");
  m.def("prelu(Tensor self, Tensor weight) -> Tensor");
  m.def("align(Tensor(a) self, Tensor other) -> Tensor(a)");
  m.def("broadcast_to_members(Tensor(a) self, int array_size) -> Tensor(a)");
  m.def("folded_member_sizes(Tensor folded, int array_size) -> int[]", hfta::ops::folded_member_sizes);
  m.def("stacked_dim(int dim) -> int", hfta::ops::stacked_dim);
  m.def("stacked_dims(int[] dims) -> int[]", hfta::ops::stacked_dims);
  m.def("member(Tensor(a)? self, int index) -> Tensor(a)?");
  m.def("member_list(Tensor[] self, int index) -> Tensor[]");
  m.def("member_list.optional(Tensor?[] self, int index) -> Tensor?[]");
  m.def("member_value(t self, int index) -> t", torch::CppFunction::makeFromBoxedFunction<&hfta::ops::member_value>());
  m.def("broadcast_list_to_members(Tensor[] self, int array_size) -> Tensor[]");
  m.def("stack_members_list(Tensor[][] members) -> Tensor[]");
  m.def("stack_members_optional(Tensor?[] members) -> Tensor?");
  m.def(
      "embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool "
      "sparse=False) -> Tensor");
  m.def("embedding_renorm_(Tensor(a!) weight, Tensor indices, float max_norm, float norm_type) -> Tensor(a!)");
  m.def(
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
      "bool cudnn_enable=True) -> Tensor");
  m.def(
      "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float "
      "dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor");
  m.def(
      "transformer_encoder_layer_fwd(Tensor src, int embed_dim, int num_heads, Tensor qkv_weight, Tensor qkv_bias, "
      "Tensor proj_weight, Tensor proj_bias, bool use_gelu, bool norm_first, float eps, Tensor norm_weight_1, Tensor "
      "norm_bias_1, Tensor norm_weight_2, Tensor norm_bias_2, Tensor ffn_weight_1, Tensor ffn_bias_1, Tensor "
      "ffn_weight_2, Tensor ffn_bias_2, Tensor? mask=None, int? mask_type=None) -> Tensor");
  m.def(
      "native_multi_head_attention(Tensor query, Tensor key, Tensor value, int embed_dim, int num_head, Tensor "
      "qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, Tensor? mask=None, bool need_weights=True, "
      "bool average_attn_weights=True, int? mask_type=None) -> (Tensor, Tensor)");
  m.def("expand(Tensor(a) self, int[] size, bool implicit=False) -> Tensor(a)");
  m.def("member_dims(Tensor array) -> int[]", hfta::ops::member_dims);
  m.def("broadcast_optional_to_members(Tensor(a)? self, int array_size) -> Tensor(a)?");
  m.def("stackable(Tensor?[] tensors, int array_size, bool distinct) -> bool", hfta::ops::stackable);
  // Recurrent layers: ATen's schemas, every tensor [B, ...].
  m.def(
      "gru(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
      "bool bidirectional, bool batch_first) -> (Tensor, Tensor)");
  m.def(
      "rnn_tanh(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
      "bool bidirectional, bool batch_first) -> (Tensor, Tensor)");
  m.def(
      "rnn_relu(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
      "bool bidirectional, bool batch_first) -> (Tensor, Tensor)");
  m.def(
      "lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
      "bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)");
  m.def("gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> Tensor");
  m.def(
      "rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> "
      "Tensor");
  m.def(
      "rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> "
      "Tensor");
  m.def(
      "lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> "
      "(Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(hfta, CompositeImplicitAutograd, m) {
  m.impl("linear", hfta::ops::linear);
  m.impl("matmul", hfta::ops::matmul);
  m.impl("addmm", hfta::ops::addmm);
  m.impl("baddbmm", hfta::ops::baddbmm);
  m.impl("t", hfta::ops::t);
  m.impl("conv", hfta::ops::conv);
  m.impl("conv_padding", hfta::ops::conv_padding);
  m.impl("conv_transpose", hfta::ops::conv_transpose);
  m.impl("batch_norm", hfta::ops::batch_norm);
  m.impl("batch_norm_momenta", hfta::ops::batch_norm_momenta);
  m.impl("group_norm", hfta::ops::group_norm);
  m.impl("instance_norm", hfta::ops::instance_norm);
  m.impl("fold_channels", hfta::ops::fold_channels);
  m.impl("unfold_channels", hfta::ops::unfold_channels);
  m.impl("repeat", hfta::ops::repeat);
  m.impl("index", hfta::ops::index);
  m.impl("prelu", hfta::ops::prelu);
  m.impl("align", hfta::ops::align);
  m.impl("broadcast_to_members", hfta::ops::broadcast_to_members);
  m.impl("member", hfta::ops::member);
  m.impl("member_list", hfta::ops::member_list);
  m.impl("member_list.optional", hfta::ops::member_optional_list);
  m.impl("broadcast_list_to_members", hfta::ops::broadcast_list_to_members);
  m.impl("stack_members_list", hfta::ops::stack_members_list);
  m.impl("stack_members_optional", hfta::ops::stack_members_optional);
  m.impl("embedding", hfta::ops::embedding);
  m.impl("embedding_renorm_", hfta::ops::embedding_renorm_);
  m.impl("layer_norm", hfta::ops::layer_norm);
  m.impl("scaled_dot_product_attention", hfta::ops::scaled_dot_product_attention);
  m.impl("transformer_encoder_layer_fwd", hfta::ops::transformer_encoder_layer_fwd);
  m.impl("native_multi_head_attention", hfta::ops::native_multi_head_attention);
  m.impl("expand", hfta::ops::expand);
  m.impl("broadcast_optional_to_members", hfta::ops::broadcast_optional_to_members);
  m.impl("lstm", hfta::ops::lstm);
  m.impl("gru", hfta::ops::gru);
  m.impl("rnn_tanh", hfta::ops::rnn_tanh);
  m.impl("rnn_relu", hfta::ops::rnn_relu);
  m.impl("lstm_cell", hfta::ops::lstm_cell);
  m.impl("gru_cell", hfta::ops::gru_cell);
  m.impl("rnn_tanh_cell", hfta::ops::rnn_tanh_cell);
  m.impl("rnn_relu_cell", hfta::ops::rnn_relu_cell);
}
