#pragma once
// The hfta:: operators: what a fused graph calls where one ATen op does not
// express "B members stacked on dimension 0" by itself. Every op here is a
// composite of ATen ops, so autograd and every backend come for free.
//
// Conventions: an "array" tensor holds B members stacked on dim 0
// ([B, *member_shape]). A "broadcast" tensor holds one member's value viewed
// as [1, *member_shape]; it stands for B identical members without a copy.
#include <ATen/ATen.h>
#include <ATen/core/stack.h>

namespace c10 {
class OperatorHandle;
}

namespace hfta::ops {

// y_b = x_b @ w_b^T + bias_b for every member b. input: [B|1, *, in],
// weight: [B, out, in], bias: [B, out] or undefined.
// Members with their own inputs run as one batched GEMM (bmm/baddbmm) or B
// at::linear calls, whichever linearForm() picks for the shape; a shared
// input ([1, *, in]) runs as one broadcast matmul.
at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
// How hfta::linear runs members with their own inputs: Chosen (the
// default) times the forms for each shape on first use and keeps the
// fastest (runtime/ops/autotune.h; with HFTA_AUTOTUNE=0, Batched); tests force
// one. Batched is one bmm/baddbmm, PerMember B at::linear calls on the
// members' slices, stacked.
enum class LinearForm { Chosen, Batched, PerMember };
LinearForm linearForm();
void setLinearForm(LinearForm form);
// log_softmax(linear(input, weight, bias), -1) per member, what the fused
// graph runs where a log-softmax over the features alone reads a linear's
// output (passes/fuse/linear_log_softmax.h). On the CPU its forms are
// linearForm()'s: Batched, one batched GEMM and one log-softmax over all
// members; PerMember, each member's GEMM then its log-softmax, while its
// scores are in cache (chosen by measurement as hfta::linear's are).
at::Tensor linear_log_softmax(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
// torch.matmul per member (1-D members included).
at::Tensor matmul(const at::Tensor& self, const at::Tensor& other);
// torch.addmm per member: beta * self_b + alpha * mat1_b @ mat2_b.
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha);
// Convolution per member: input channel-folded [N, B*C, *] or one input all
// members share [N, C, *]; weight [B, out, in/groups, k...], bias [B, out].
// One grouped convolution (groups * B), the same in the channels-last
// layout, or B dense ones on the members' channel slices, whichever
// convForm() picks for the shape;
// a shared input with groups == 1 runs as one dense convolution with B*out
// channels. Returns [N, B*out, *].
at::Tensor conv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);
// How hfta::conv runs B convolutions on a channel-folded input: Chosen (the
// default) times the forms for each shape on first use and keeps the
// fastest (runtime/ops/autotune.h; with HFTA_AUTOTUNE=0 a heuristic that
// conv_ops.cpp states); tests force one. Grouped runs in the layout the
// input comes in; ChannelsLast turns a 2-D convolution's input and weight
// channels-last, and its output back to the input's layout; Unfolded runs a
// 2-D convolution as batched GEMMs over the unfolded input
// (runtime/ops/conv_unfolded.h). A form a convolution cannot take runs
// grouped.
enum class ConvForm { Chosen, Grouped, PerMember, ChannelsLast, Unfolded };
ConvForm convForm();
void setConvForm(ConvForm form);
// The same with padding "same" or "valid".
at::Tensor conv_padding(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, c10::string_view padding, at::IntArrayRef dilation, int64_t groups);
// Transposed convolution per member: weight [B, in, out/groups, k...].
at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                          int64_t groups, at::IntArrayRef dilation);
// Batch norm per member: input channel-folded [N, B*C, *]; weight, bias and
// the running statistics [B, C] (updated in place, each member its own
// slice). Returns [N, B*C, *].
at::Tensor batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                      const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
                      bool cudnn_enabled);
// The same with one momentum per member (momentum=None: each member's
// cumulative-average factor 1 / num_batches_tracked).
at::Tensor batch_norm_momenta(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                              const std::optional<at::Tensor>& running_var, bool training, at::ArrayRef<double> momenta,
                              double eps, bool cudnn_enabled);
// Group norm per member: input channel-folded [N, B*C, *], weight and bias
// [B, C]. One group norm with B * num_groups groups: the folded channels of
// group b * num_groups + g are member b's group g.
at::Tensor group_norm(const at::Tensor& input, int64_t num_groups, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, bool cudnn_enabled, int64_t array_size);
// Instance norm per member: input channel-folded [N, B*C, *]; weight, bias
// and the running statistics [B, C] (updated in place, each member its own
// slice, as at::instance_norm updates a member's). Returns [N, B*C, *].
at::Tensor instance_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                         const std::optional<at::Tensor>& running_var, bool use_input_stats, double momentum,
                         double eps, bool cudnn_enabled);
// PReLU with each member's own slopes: weight [B, C] or [B, 1].
at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight);
// torch.baddbmm per member: self_b * beta + alpha * batch1_b @ batch2_b, one
// baddbmm over all members' batches.
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                   const at::Scalar& alpha);
// Tensor.t() per member (a view).
at::Tensor t(const at::Tensor& self);

// aten::dropout on [B, ...] (dropout_ops.cpp): on the CPU, in training,
// a counter-based generator keyed by one draw of the default generator per
// call; elsewhere at::dropout.
at::Tensor dropout(const at::Tensor& input, double p, bool train);

// Transformer ops (transformer_ops.cpp). Embedding rows of each member's
// table: weight [B, V, D], indices [B|1, *] -> [B, *, D]; padding_idx rows
// get no gradient in any member.
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                     bool sparse);
// F.embedding's max_norm: renormalizes the rows each member looks up, in
// its own slice of the stacked table.
at::Tensor& embedding_renorm_(at::Tensor& weight, const at::Tensor& indices, double max_norm, double norm_type);
// Layer norm over a member's last dims with its own weight and bias
// ([B, *normalized_shape]); the input may be shared ([1, ...]).
at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps,
                      bool cudnn_enable);
// Attention per member with the members folded into the batch dim: query,
// key, value [B|1, *batch, L, E]; the mask [B|1, ...] as a member's mask
// with the member dim first. Dropout draws each member's own mask.
at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                        const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                        std::optional<double> scale, bool enable_gqa);
// PyTorch's inference fast paths of nn.TransformerEncoderLayer and
// nn.MultiheadAttention, for stacked weights ([B, ...]) and inputs
// [B|1, N, L, E]; masks as the ATen ops take them, with the member dim first.
at::Tensor transformer_encoder_layer_fwd(const at::Tensor& src, int64_t embed_dim, int64_t num_heads,
                                         const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                                         const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
                                         bool norm_first, double eps, const at::Tensor& norm_weight_1,
                                         const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
                                         const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
                                         const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
                                         const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
                                         std::optional<int64_t> mask_type);
std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type);
// Tensor.expand per member (sizes may add leading member dims).
at::Tensor expand(const at::Tensor& array, at::IntArrayRef size, bool implicit);
// The member dims of an array ([1, ..., dim - 1]): a reduction over all of
// a member's dims.
std::vector<int64_t> member_dims(const at::Tensor& array);
// broadcast_to_members for an optional tensor (None stays None).
std::optional<at::Tensor> broadcast_optional_to_members(const std::optional<at::Tensor>& self, int64_t array_size);

// `self` viewed with singleton dims after dim 0 so that its rank is at least
// other's: per-member broadcasting then lines up like the members' own.
at::Tensor align(const at::Tensor& self, const at::Tensor& other);
// A [1, ...] (broadcast) tensor expanded to `array_size` members; a [B, ...]
// one is returned as it is. A view.
at::Tensor expand_members(const at::Tensor& t, int64_t array_size);
// The channel-folded layout of convolutional values: members [B|1, N, C, *]
// become [N, B*C, *] (a copy), and back (a view).
at::Tensor fold_channels(const at::Tensor& array, int64_t array_size);
at::Tensor unfold_channels(const at::Tensor& folded, int64_t array_size);
// A member's sizes, read off its folded value.
std::vector<int64_t> folded_member_sizes(const at::Tensor& folded, int64_t array_size);
// One member's value as B identical members: [B, *shape] (an expand view).
at::Tensor broadcast_to_members(const at::Tensor& self, int64_t array_size);
// Tensor.repeat per member (repeats may add leading member dims).
at::Tensor repeat(const at::Tensor& array, at::IntArrayRef repeats);
// x[indices] per member (aten::index): the indices are the members' [B, ...]
// or, with shared_indices, one member's, the same for all. Integer indices
// gather in one at::index call with the member index in front; masks and
// None (skipped dims) run member by member.
at::Tensor index(const at::Tensor& array, const c10::List<std::optional<at::Tensor>>& indices, bool shared_indices);
// A non-negative member dim moves one to the right; a negative one stays.
int64_t stacked_dim(int64_t dim);
std::vector<int64_t> stacked_dims(std::vector<int64_t> dims);

// Used by the per-member fallback for values that are not plain tensors.
std::optional<at::Tensor> member(const std::optional<at::Tensor>& self, int64_t index);
std::vector<at::Tensor> member_list(at::TensorList self, int64_t index);
c10::List<std::optional<at::Tensor>> member_optional_list(const c10::List<std::optional<at::Tensor>>& self,
                                                          int64_t index);
// hfta::member_value(t self, int index) -> t, boxed: member `index` of any
// other container of arrays (lists of lists, of tuples): every tensor leaf
// [B, ...] becomes its slice.
void member_value(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// A list all members share as the members' list: each tensor viewed [B, ...].
std::vector<at::Tensor> broadcast_list_to_members(at::TensorList self, int64_t array_size);
std::vector<at::Tensor> stack_members_list(const c10::List<c10::List<at::Tensor>>& members);
std::optional<at::Tensor> stack_members_optional(const c10::List<std::optional<at::Tensor>>& members);
// Whether each group of `array_size` consecutive tensors can be stacked
// into one: same sizes, dtype, device and layout, and, if `distinct`, no
// two sharing memory (members that share a parameter must not be fused);
// a group of Nones is stackable, a group mixing None and tensors is not.
bool stackable(const c10::List<std::optional<at::Tensor>>& tensors, int64_t array_size, bool distinct);
// hfta::segment_plan(str graph, int segment, int segments, Any self, Any[]
// inputs) -> bool, boxed: whether segment `segment` (of `segments`) of the
// fused graph `graph` runs its fused plan this call, else its members' ops
// (segment_plan.h; the first segment's call passes the module and its
// forward's inputs).
void segment_plan(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Recurrent layers (aten::lstm, gru, rnn_tanh, rnn_relu) over stacked
// members: input [B|1, T, N, I] ([B|1, N, T, I] batch-first), states
// [B|1, layers * directions, N, H], params in ATen's order, each [B, ...];
// outputs [B, ...]. All members step at once, or each runs ATen's own op on
// its slices, whichever recurrentForm() picks (runtime/ops/recurrent_ops.cpp).
// How the recurrent layers run: Chosen (the default) times the forms for
// each shape on first use on CPU and keeps the fastest (with HFTA_AUTOTUNE=0,
// and on CUDA, Stepped); tests force one. Stepped runs every member at each
// time step (batched GEMMs, the gates over [B, N, gates]); PerMember runs
// each member's aten::lstm/gru/rnn_* on its slices, one after another.
// Dropout between layers draws the same numbers in both.
enum class RecurrentForm { Chosen, Stepped, PerMember };
RecurrentForm recurrentForm();
void setRecurrentForm(RecurrentForm form);
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm(const at::Tensor& input, at::TensorList hx, at::TensorList params,
                                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                                    bool bidirectional, bool batch_first);
std::tuple<at::Tensor, at::Tensor> gru(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                       bool has_biases, int64_t num_layers, double dropout, bool train,
                                       bool bidirectional, bool batch_first);
std::tuple<at::Tensor, at::Tensor> rnn_tanh(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout, bool train,
                                            bool bidirectional, bool batch_first);
std::tuple<at::Tensor, at::Tensor> rnn_relu(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout, bool train,
                                            bool bidirectional, bool batch_first);
// Their cells: input [B|1, N, I], states [B|1, N, H], weights [B, ...].
std::tuple<at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input, at::TensorList hx, const at::Tensor& w_ih,
                                             const at::Tensor& w_hh, const std::optional<at::Tensor>& b_ih,
                                             const std::optional<at::Tensor>& b_hh);
at::Tensor gru_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                    const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh);
at::Tensor rnn_tanh_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                         const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh);
at::Tensor rnn_relu_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                         const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh);

}  // namespace hfta::ops
