// Per-member matrix products, lowered to one batched GEMM (bmm/baddbmm) or
// B GEMMs, whichever is faster here, or, when every member sees the same
// input, to one broadcast matmul.
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>

#include "runtime/ops/autotune.h"
#include "runtime/ops/linear_forms.h"
#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

// Member dims of a stacked tensor.
int64_t memberDim(const at::Tensor& t) { return t.dim() - 1; }

std::atomic<LinearForm> forced_linear_form{LinearForm::Chosen};

// The members' own GEMMs, each writing its slice of one stacked output,
// and in backward its slices of the stacked gradients: no stack of B
// outputs (a copy as large as the output, in forward) and no stack of B
// weight gradients (in backward), which at::linear per member and at::stack
// would cost (the word LM's decoder: 745 MB of logits copied per step).
// Differentiating the gradients again (create_graph) takes at::linear's
// per-member gradients, whose ops autograd records.
struct PerMemberLinear : torch::autograd::Function<PerMemberLinear> {
  // (bias as an optional: apply() takes an undefined at::Tensor for a
  // variable and fails on it.)
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& maybe_bias) {
    const auto bias = maybe_bias.value_or(at::Tensor());
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.defined();
    auto y = at::empty({x.size(0), x.size(1), weight.size(1)}, x.options());
    for (int64_t m = 0; m < x.size(0); ++m) {
      auto slice = y.select(0, m);
      const auto w_t = weight.select(0, m).t();
      if (bias.defined()) {
        at::addmm_out(slice, bias.select(0, m), x.select(0, m), w_t);
      } else {
        at::mm_out(slice, x.select(0, m), w_t);
      }
    }
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1];
    const auto& grad = grads[0];
    if (at::GradMode::is_enabled()) {  // create_graph: gradients autograd can differentiate
      std::vector<at::Tensor> gx, gw;
      for (int64_t m = 0; m < x.size(0); ++m) {
        gx.push_back(at::mm(grad.select(0, m), weight.select(0, m)));
        gw.push_back(at::mm(grad.select(0, m).t(), x.select(0, m)));
      }
      return {at::stack(gx), at::stack(gw), ctx->saved_data["bias"].toBool() ? grad.sum(1) : at::Tensor()};
    }
    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (ctx->needs_input_grad(1)) grad_weight = at::empty_like(weight, at::MemoryFormat::Contiguous);
    for (int64_t m = 0; m < x.size(0); ++m)
      writeMemberGemmGradients(m, grad.select(0, m), x, weight, grad_x, grad_weight);
    // (needs_input_grad counts the tensors given: no bias, no index 2)
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) grad_bias = grad.sum(1);
    return {grad_x, grad_weight, grad_bias};
  }
};

// One batched GEMM forward, two and a sum in backward, in one autograd
// node: baddbmm's own gradient would add nodes for the weight's transpose
// and the bias's unsqueeze and broadcast (sum_to_size), which at a small
// MLP's sizes cost more than its GEMMs do.
struct BatchedLinear : torch::autograd::Function<BatchedLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& maybe_bias) {
    const auto bias = maybe_bias.value_or(at::Tensor());
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.defined();
    return batchedGemm(x, weight, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // (Under create_graph these ops are recorded: the gradients can be
    // differentiated again.)
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1];
    const auto& grad = grads[0];
    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) grad_x = at::bmm(grad, weight);
    if (ctx->needs_input_grad(1)) grad_weight = at::bmm(grad.transpose(1, 2), x);
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) grad_bias = grad.sum(1);
    return {grad_x, grad_weight, grad_bias};
  }
};

// x [B, M, in], weight [B, out, in], bias [B, out] or undefined -> [B, M, out].
at::Tensor runForm(LinearForm form, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (form == LinearForm::PerMember) {
    if (at::autocast::is_autocast_enabled(x.device().type())) {
      // A fused op (attention, a recurrent layer) calling this under
      // autocast: at::linear casts as autocast does, the out= GEMMs would not.
      const auto xs = x.unbind(0), ws = weight.unbind(0);
      const auto bs = bias.defined() ? bias.unbind(0) : std::vector<at::Tensor>(xs.size());
      std::vector<at::Tensor> ys;
      for (size_t m = 0; m < xs.size(); ++m) ys.push_back(at::linear(xs[m], ws[m], bs[m]));
      return at::stack(ys);
    }
    return PerMemberLinear::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt);
  }
  const bool records = at::GradMode::is_enabled() &&
                       (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (records && !at::autocast::is_autocast_enabled(x.device().type())) {
    return BatchedLinear::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt);
  }
  // (No gradient to record, or autocast, which casts baddbmm's inputs
  // first: the saved tensors must be the casts, as ATen's node saves them.)
  return batchedGemm(x, weight, bias);
}

}  // namespace

at::Tensor batchedGemm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto w_t = weight.transpose(1, 2);  // [B, in, out]
  return bias.defined() ? at::baddbmm(bias.unsqueeze(1), x, w_t) : at::bmm(x, w_t);
}

void writeMemberGemmGradients(int64_t m, const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight,
                              at::Tensor& grad_x, at::Tensor& grad_weight) {
  if (grad_x.defined()) {
    auto slice = grad_x.select(0, m);
    at::mm_out(slice, g, weight.select(0, m));
  }
  if (grad_weight.defined()) {
    auto slice = grad_weight.select(0, m);
    at::mm_out(slice, g.t(), x.select(0, m));
  }
}

// As forced, else the faster form measured here for these shapes (forward
// and, where gradients are on, backward), else Batched: one launch, and on
// the processors measured (bench/README.md) within a few percent of B
// GEMMs where it is not ahead.
LinearForm chooseLinearForm(const char* op, autotune::Memo& memo, LinearRun run, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& bias) {
  const auto forced = forced_linear_form.load();
  if (forced != LinearForm::Chosen) return forced;
  if (!autotune::enabled()) return LinearForm::Batched;
  const bool backward = autotune::recordsGradients();
  static const std::vector<LinearForm> forms{LinearForm::Batched, LinearForm::PerMember};
  autotune::Memo::Signature signature{backward};
  autotune::appendTensor(signature, x);
  autotune::appendTensor(signature, weight);
  signature.push_back(bias.defined());
  const auto key = [&] {
    return fmt::format("{}|in [{}]|weight [{}]|bias {}|{}|{}|{}|forms batched,per-member|{}", op,
                       fmt::join(x.sizes(), ","), fmt::join(weight.sizes(), ","), bias.defined(),
                       c10::toString(x.scalar_type()), x.device().str(), backward ? "forward+backward" : "forward",
                       autotune::machine(x.device()));
  };
  const auto candidates = [&] {
    std::vector<std::function<void()>> runs;
    for (const auto form : forms) {
      runs.push_back(autotune::candidate({x, weight, bias}, backward, [form, run](const std::vector<at::Tensor>& t) {
        return run(form, t[0], t[1], t[2]);
      }));
    }
    return runs;
  };
  return forms[memo.choose(signature, 0, key, candidates)];
}

LinearForm linearForm() { return forced_linear_form.load(); }
void setLinearForm(LinearForm form) { forced_linear_form = form; }

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 3, "hfta::linear: weight must be [B, out, in], got ", weight.sizes());
  TORCH_CHECK(input.dim() >= 2, "hfta::linear: input must be [B, ..., in], got ", input.sizes());
  const int64_t members = weight.size(0);
  const int64_t in_features = weight.size(2);
  const int64_t out_features = weight.size(1);
  TORCH_CHECK(input.size(0) == members || input.size(0) == 1, "hfta::linear: input has ", input.size(0),
              " members, weight ", members);

  // [B|1, *, in] -> [B|1, M, in], remembering * to restore it.
  std::vector<int64_t> out_sizes{members};
  for (int64_t d = 1; d + 1 < input.dim(); ++d) out_sizes.push_back(input.size(d));
  out_sizes.push_back(out_features);
  // (A view costs an autograd node each way: none where x is [B, M, in].)
  const auto x = input.dim() == 3 ? input : input.reshape({input.size(0), -1, in_features});
  const auto b = bias.value_or(at::Tensor());
  if (x.size(0) == members) {
    static autotune::Memo memo;
    const auto y = runForm(chooseLinearForm("hfta::linear", memo, runForm, x, weight, b), x, weight, b);
    return input.dim() == 3 ? y : y.reshape(out_sizes);
  }
  // Shared input: [M, in] @ [B, in, out] broadcasts to [B, M, out].
  auto y = at::matmul(x.select(0, 0), weight.transpose(1, 2));
  if (b.defined()) y = y + b.unsqueeze(1);
  return y.reshape(out_sizes);
}

at::Tensor matmul(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() >= 2 && other.dim() >= 2,
              "hfta::matmul: operands must be stacked tensors with at least one member dim");
  const bool self_vector = memberDim(self) == 1;
  const bool other_vector = memberDim(other) == 1;
  auto a = self_vector ? self.unsqueeze(-2) : self;     // [B, 1, k]
  auto b = other_vector ? other.unsqueeze(-1) : other;  // [B, k, 1]
  auto y = at::matmul(align(a, b), align(b, a));
  if (other_vector) y = y.squeeze(-1);
  if (self_vector) y = y.squeeze(-1 - (other_vector ? 0 : 1));
  return y;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  TORCH_CHECK(mat1.dim() == 3 && mat2.dim() == 3, "hfta::addmm: mat1 and mat2 must be stacked matrices [B, n, m]");
  const int64_t members = std::max(mat1.size(0), mat2.size(0));
  return at::baddbmm(align(self, mat1), expand_members(mat1, members), expand_members(mat2, members), beta, alpha);
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  TORCH_CHECK(batch1.dim() == 4 && batch2.dim() == 4,
              "hfta::baddbmm: batch1 and batch2 must be stacked batches of matrices [B, N, n, m]");
  const int64_t members = std::max({self.size(0), batch1.size(0), batch2.size(0)});
  const auto b1 = expand_members(batch1, members);
  const auto b2 = expand_members(batch2, members);
  // One baddbmm over the members' batches: [B*N, n, m] @ [B*N, m, p].
  auto sizes = b1.sizes().vec();
  sizes.back() = b2.size(-1);
  const auto input = align(self, b1).expand(sizes).reshape({-1, sizes[2], sizes[3]});
  return at::baddbmm(input, b1.flatten(0, 1), b2.flatten(0, 1), beta, alpha).view(sizes);
}

at::Tensor t(const at::Tensor& self) {
  TORCH_CHECK(memberDim(self) <= 2, "hfta::t: members have ", memberDim(self), " dims; t() expects at most 2");
  return memberDim(self) < 2 ? self.alias() : self.transpose(1, 2);
}

}  // namespace hfta::ops
