// A linear layer whose output only a log-softmax over its features reads
// (a language model's decoder and its log-probabilities): the linear's
// batched form and one log-softmax over all members' scores, or each
// member's GEMM followed at once by its log-softmax, whichever is faster
// here. Member by member, the log-softmax reads scores the GEMM has just
// written, still in cache, and backward's GEMMs read the log-softmax's
// gradient the same way; over the stacked scores (45 MB for the LSTM LM's
// eight members) every pass goes to memory.
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/ops/autotune.h"
#include "runtime/ops/linear_forms.h"
#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

// x [B, M, in], weight [B, out, in], bias [B, out] (or none) ->
// log_softmax(x_b @ weight_b^T + bias_b) per member, [B, M, out]. One
// member's scores at a time live in a scratch tensor, read back by its
// log-softmax; backward keeps the same order for the log-softmax's gradient.
struct PerMemberLinearLogSoftmax : torch::autograd::Function<PerMemberLinearLogSoftmax> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& maybe_bias) {
    const auto bias = maybe_bias.value_or(at::Tensor());
    auto out = at::empty({x.size(0), x.size(1), weight.size(1)}, x.options());
    auto scores = at::empty({x.size(1), weight.size(1)}, x.options());
    for (int64_t m = 0; m < x.size(0); ++m) {
      const auto w_t = weight.select(0, m).t();
      if (bias.defined()) {
        at::addmm_out(scores, bias.select(0, m), x.select(0, m), w_t);
      } else {
        at::mm_out(scores, x.select(0, m), w_t);
      }
      auto slice = out.select(0, m);
      at::_log_softmax_out(slice, scores, 1, /*half_to_float=*/false);
    }
    ctx->save_for_backward({x, weight, out});
    ctx->saved_data["bias"] = bias.defined();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &out = saved[2];
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const auto grad = grads[0].contiguous();
    if (at::GradMode::is_enabled()) {  // create_graph: ATen's ops, which autograd records
      const auto g = at::_log_softmax_backward_data(grad, out, -1, out.scalar_type());
      return {at::bmm(g, weight), at::bmm(g.transpose(1, 2), x), has_bias ? g.sum(1) : at::Tensor()};
    }
    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (ctx->needs_input_grad(1)) grad_weight = at::empty_like(weight, at::MemoryFormat::Contiguous);
    // (needs_input_grad counts the tensors given: no bias, no index 2)
    if (has_bias && ctx->needs_input_grad(2)) grad_bias = at::empty({x.size(0), weight.size(1)}, x.options());
    auto g = at::empty({x.size(1), weight.size(1)}, x.options());  // one member's scores' gradient
    for (int64_t m = 0; m < x.size(0); ++m) {
      at::_log_softmax_backward_data_out(g, grad.select(0, m), out.select(0, m), 1, out.scalar_type());
      writeMemberGemmGradients(m, g, x, weight, grad_x, grad_weight);
      if (grad_bias.defined()) {
        auto slice = grad_bias.select(0, m);
        at::sum_out(slice, g, 0);
      }
    }
    return {grad_x, grad_weight, grad_bias};
  }
};

at::Tensor runForm(LinearForm form, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (form == LinearForm::PerMember) {
    return PerMemberLinearLogSoftmax::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt);
  }
  return at::log_softmax(batchedGemm(x, weight, bias), -1);
}

}  // namespace

at::Tensor linear_log_softmax(const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 3, "hfta::linear_log_softmax: weight must be [B, out, in], got ", weight.sizes());
  TORCH_CHECK(input.dim() >= 2 && input.size(-1) == weight.size(2), "hfta::linear_log_softmax: input must be [B, ..., ",
              weight.size(2), "], got ", input.sizes());
  const bool own_inputs = input.size(0) == weight.size(0);
  // The chained form is the CPU's (where the cache is the point) in the
  // dtypes whose log-softmax keeps its dtype; autocast, a shared input and
  // every other case take the two ops as hfta::linear and ATen run them.
  if (!own_inputs || !input.device().is_cpu() || at::autocast::is_autocast_enabled(at::kCPU) ||
      !(input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble)) {
    return at::log_softmax(ops::linear(input, weight, bias), -1);
  }
  std::vector<int64_t> out_sizes(input.sizes().begin(), input.sizes().end() - 1);
  out_sizes.push_back(weight.size(1));
  const auto x = input.reshape({input.size(0), -1, weight.size(2)});
  const auto b = bias.value_or(at::Tensor());
  static autotune::Memo memo;
  const auto form = chooseLinearForm("hfta::linear_log_softmax", memo, runForm, x, weight, b);
  return runForm(form, x, weight, b).reshape(out_sizes);
}

}  // namespace hfta::ops
