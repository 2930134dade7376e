// One LSTM layer and direction over stacked members, stepped in few calls.
//
// Stepping an LSTM op by op under autograd (recurrent_ops.cpp's step())
// costs about 30 ATen calls and a dozen autograd nodes per time step, each
// over a small [B, N, 4H] tensor, so that at the LSTM LM's size (B = 8,
// N = 20, H = 64, 35 steps) the calls, not the arithmetic, took the time
// and each member's own oneDNN kernel won (bench/RESULTS.md). Here one
// autograd node covers the whole sequence: forward runs each step as one
// batched GEMM and eight element-wise calls into buffers kept for backward
// (the gates' activations, c and tanh(c) at every step), and backward runs
// each step as one GEMM and about ten element-wise calls, then the weight
// gradients of all steps as one batched GEMM.
//
// The arithmetic is ATen's CPU LSTM cell's (aten/src/ATen/native/RNN.cpp):
// gates = linear_hh(h) + linear_ih(x), i, f, o = sigmoid and g = tanh of
// its chunks, c' = f * c + i * g, h' = o * tanh(c'); the backward is
// autograd's for those ops (sigmoid_backward, tanh_backward), so a member
// computes what it computes alone up to summation order. The backward is
// not differentiable again (neither is ATen's oneDNN LSTM's, which the
// members run alone on the CPU).
#include "runtime/ops/lstm_steps.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace hfta::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The four gates' columns of a [..., 4H] tensor, in ATen's order.
struct Gates {
  at::Tensor in, forget, cell, out;
};

Gates gatesOf(const at::Tensor& t, int64_t hidden) {
  return {t.narrow(-1, 0, hidden), t.narrow(-1, hidden, hidden), t.narrow(-1, 2 * hidden, hidden),
          t.narrow(-1, 3 * hidden, hidden)};
}

// Step i of the run's order is time t.
int64_t timeAt(int64_t i, int64_t steps, bool reverse) { return reverse ? steps - 1 - i : i; }

struct LstmStepsFunction : torch::autograd::Function<LstmStepsFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_gates, const at::Tensor& h0,
                               const at::Tensor& c0, const at::Tensor& w_hh, const std::optional<at::Tensor>& b_hh,
                               bool reverse) {
    const int64_t members = x_gates.size(0), steps = x_gates.size(1), batch = x_gates.size(2);
    const int64_t hidden = w_hh.size(2);
    const auto options = x_gates.options();
    auto output = at::empty({members, steps, batch, hidden}, options);
    auto activations = at::empty({members, steps, batch, 4 * hidden}, options);  // i, f, g, o after sigmoid/tanh
    auto cells = at::empty({members, steps, batch, hidden}, options);
    auto tanh_cells = at::empty({members, steps, batch, hidden}, options);
    auto gates = at::empty({members, batch, 4 * hidden}, options);
    auto product = at::empty({members, batch, hidden}, options);
    // linear_hh's bias enters as in hfta::ops::linear: the GEMM adds onto it.
    const auto bias = b_hh ? b_hh->unsqueeze(1).expand({members, batch, 4 * hidden}) : at::Tensor();
    const auto w_hh_t = w_hh.transpose(1, 2);
    at::Tensor h = h0, c = c0;
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t t = timeAt(i, steps, reverse);
      if (bias.defined()) {
        at::baddbmm_out(gates, bias, h, w_hh_t);
      } else {
        at::bmm_out(gates, h, w_hh_t);
      }
      gates.add_(x_gates.select(1, t));
      auto act = activations.select(1, t);
      at::sigmoid_out(act, gates);
      auto a = gatesOf(act, hidden);
      at::tanh_out(a.cell, gatesOf(gates, hidden).cell);
      auto c_next = cells.select(1, t), tanh_c = tanh_cells.select(1, t), h_next = output.select(1, t);
      at::mul_out(c_next, a.forget, c);
      at::mul_out(product, a.in, a.cell);
      c_next.add_(product);
      at::tanh_out(tanh_c, c_next);
      at::mul_out(h_next, a.out, tanh_c);
      h = h_next;
      c = c_next;
    }
    ctx->save_for_backward({h0, c0, w_hh, output, activations, cells, tanh_cells});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["bias"] = b_hh.has_value();
    ctx->set_materialize_grads(false);
    // h and c are views of the buffers; the last state is returned as its
    // own tensors.
    return {output, h.clone(), c.clone()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "hfta: the fused LSTM's backward cannot be differentiated again (create_graph=True); neither can "
                "ATen's oneDNN LSTM, which runs a member alone on the CPU");
    const auto saved = ctx->get_saved_variables();
    const auto &h0 = saved[0], &c0 = saved[1], &w_hh = saved[2], &output = saved[3], &activations = saved[4],
               &cells = saved[5], &tanh_cells = saved[6];
    const bool reverse = ctx->saved_data["reverse"].toBool();
    const int64_t members = output.size(0), steps = output.size(1), batch = output.size(2), hidden = output.size(3);
    const auto &grad_output = grads[0], &grad_h_last = grads[1], &grad_c_last = grads[2];

    // d(loss)/d(gates before their activations) at every step: the
    // gradient of x_gates itself, and of linear_hh's output.
    auto grad_gates = at::empty_like(activations);
    auto grad_h = grad_h_last.defined() ? grad_h_last.clone() : at::zeros_like(h0, at::MemoryFormat::Contiguous);
    auto grad_c = grad_c_last.defined() ? grad_c_last.clone() : at::zeros_like(c0, at::MemoryFormat::Contiguous);
    auto dh = at::empty({members, batch, hidden}, output.options());
    auto through_tanh = at::empty_like(dh);
    for (int64_t i = steps - 1; i >= 0; --i) {
      const int64_t t = timeAt(i, steps, reverse);
      const auto c_prev = i == 0 ? c0 : cells.select(1, timeAt(i - 1, steps, reverse));
      const auto a = gatesOf(activations.select(1, t), hidden);
      const auto tanh_c = tanh_cells.select(1, t);
      auto grad_step = grad_gates.select(1, t);
      auto g = gatesOf(grad_step, hidden);
      // h' = o * tanh(c'), reached from the output at t and from step t+1.
      const auto& dh_total = grad_output.defined() ? at::add_out(dh, grad_output.select(1, t), grad_h) : grad_h;
      at::mul_out(g.out, dh_total, tanh_c);
      at::mul_out(through_tanh, dh_total, a.out);
      at::tanh_backward_out(through_tanh, through_tanh, tanh_c);
      grad_c.add_(through_tanh);
      // c' = f * c + i * g
      at::mul_out(g.in, grad_c, a.cell);
      at::mul_out(g.forget, grad_c, c_prev);
      at::mul_out(g.cell, grad_c, a.in);
      grad_c.mul_(a.forget);
      // Through the activations: sigmoid for i, f (adjacent) and o, tanh for g.
      auto in_forget = grad_step.narrow(-1, 0, 2 * hidden);
      at::sigmoid_backward_out(in_forget, in_forget, activations.select(1, t).narrow(-1, 0, 2 * hidden));
      at::tanh_backward_out(g.cell, g.cell, a.cell);
      at::sigmoid_backward_out(g.out, g.out, a.out);
      at::bmm_out(grad_h, grad_step, w_hh);
    }
    // linear_hh over every step at once: its input at time t was h from
    // the step before in the run's order (h0 first).
    const auto h_before = reverse ? at::cat({output.narrow(1, 1, steps - 1), h0.unsqueeze(1)}, 1)
                                  : at::cat({h0.unsqueeze(1), output.narrow(1, 0, steps - 1)}, 1);
    const auto flat_grad = grad_gates.view({members, steps * batch, 4 * hidden});
    auto grad_w_hh = at::bmm(flat_grad.transpose(1, 2), h_before.reshape({members, steps * batch, hidden}));
    auto grad_b_hh = ctx->saved_data["bias"].toBool() ? flat_grad.sum(1) : at::Tensor();
    return {grad_gates, grad_h, grad_c, grad_w_hh, grad_b_hh, at::Tensor()};
  }
};

bool sameFloatingType(std::initializer_list<at::Tensor> tensors, const at::Tensor& first) {
  for (const auto& t : tensors) {
    if (t.defined() && (t.scalar_type() != first.scalar_type() || t.device() != first.device())) return false;
  }
  return first.scalar_type() == at::kFloat || first.scalar_type() == at::kDouble;
}

}  // namespace

bool lstmStepsApplies(const at::Tensor& x_gates, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_hh,
                      const at::Tensor& b_hh) {
  return sameFloatingType({h0, c0, w_hh, b_hh}, x_gates) && x_gates.size(1) > 0 &&
         !at::autocast::is_autocast_enabled(x_gates.device().type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmSteps(const at::Tensor& x_gates, const at::Tensor& h0,
                                                         const at::Tensor& c0, const at::Tensor& w_hh,
                                                         const at::Tensor& b_hh, bool reverse) {
  // An undefined tensor cannot be an argument of apply; an empty optional can.
  const auto bias = b_hh.defined() ? std::optional<at::Tensor>(b_hh) : std::nullopt;
  const auto out = LstmStepsFunction::apply(x_gates, h0, c0, w_hh, bias, reverse);
  return {out[0], out[1], out[2]};
}

}  // namespace hfta::ops
