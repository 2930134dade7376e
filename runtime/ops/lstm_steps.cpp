// One LSTM layer and direction over stacked members, stepped in few calls.
//
// Stepping an LSTM op by op under autograd (recurrent_ops.cpp's step())
// costs about 30 ATen calls and a dozen autograd nodes per time step, each
// over a small [B, N, 4H] tensor, so that at the LSTM LM's size (B = 8,
// N = 20, H = 64, 35 steps) the calls, not the arithmetic, took the time
// and each member's own oneDNN kernel won (bench/RESULTS.md). Here one
// autograd node covers the whole sequence: forward runs each step as one
// batched GEMM and one element-wise pass (lstm_cell_kernels_body.h) that
// keeps what backward needs (the gates' activations, c and tanh(c) at
// every step); backward runs each step as one pass and one GEMM, then the
// weight gradient of all steps as one batched GEMM. CPU only: CUDA steps
// op by op (recurrent_ops.cpp).
//
// The arithmetic is ATen's CPU LSTM cell's (aten/src/ATen/native/RNN.cpp):
// gates = linear_hh(h) + linear_ih(x), i, f, o = sigmoid and g = tanh of
// its chunks, c' = f * c + i * g, h' = o * tanh(c'); the backward is
// autograd's for those ops (sigmoid_backward, tanh_backward), so a member
// computes what it computes alone up to summation order and the rounding
// of sigmoid and tanh (lstm_cell_kernels_body.h says how they are
// computed). The backward is not differentiable again (neither is ATen's
// oneDNN LSTM's, which the members run alone on the CPU).
#include "runtime/ops/lstm_steps.h"

#include <ATen/Dispatch.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <type_traits>

#include "runtime/ops/lstm_cell_kernels.h"

namespace hfta::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Step i of the run's order is time t.
int64_t timeAt(int64_t i, int64_t steps, bool reverse) { return reverse ? steps - 1 - i : i; }

// One time step's [B, N, width] slice of a [B, T, N, width] buffer, or of
// a [B, N, width] tensor (steps == 0).
template <typename T>
lstm_cell::StepSlice<T> slice(const at::Tensor& t, int64_t time, int64_t steps) {
  const int64_t rows = t.size(-2) * t.size(-1);
  return {t.data_ptr<std::remove_const_t<T>>() + time * rows, steps == 0 ? rows : steps * rows};
}

// c before step i of the run's order: c0 at the first step, else the cell
// state the step before wrote into `cells`.
template <typename T>
lstm_cell::StepSlice<const T> cellBefore(int64_t i, const at::Tensor& c0, const at::Tensor& cells, bool reverse) {
  const int64_t steps = cells.size(1);
  return i == 0 ? slice<const T>(c0, 0, 0) : slice<const T>(cells, timeAt(i - 1, steps, reverse), steps);
}

struct LstmStepsFunction : torch::autograd::Function<LstmStepsFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input_gates, const at::Tensor& h0,
                               const at::Tensor& c0_in, const at::Tensor& w_hh, const std::optional<at::Tensor>& b_hh,
                               bool reverse) {
    const auto x_gates = input_gates.contiguous();
    const auto c0 = c0_in.contiguous();
    const int64_t members = x_gates.size(0), steps = x_gates.size(1), batch = x_gates.size(2);
    const int64_t hidden = w_hh.size(2);
    const auto options = x_gates.options();
    auto output = at::empty({members, steps, batch, hidden}, options);
    auto activations = at::empty({members, steps, batch, 4 * hidden}, options);  // i, f, g, o after sigmoid/tanh
    auto cells = at::empty({members, steps, batch, hidden}, options);
    auto tanh_cells = at::empty({members, steps, batch, hidden}, options);
    auto gates = at::empty({members, batch, 4 * hidden}, options);
    // linear_hh's bias enters as in hfta::ops::linear: the GEMM adds onto it.
    const auto bias = b_hh ? b_hh->unsqueeze(1).expand({members, batch, 4 * hidden}) : at::Tensor();
    const auto w_hh_t = w_hh.transpose(1, 2).contiguous();
    auto h = h0.contiguous();
    const lstm_cell::Shape shape{members, batch, hidden};
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t t = timeAt(i, steps, reverse);
      if (bias.defined()) {
        at::baddbmm_out(gates, bias, h, w_hh_t);
      } else {
        at::bmm_out(gates, h, w_hh_t);
      }
      AT_DISPATCH_FLOATING_TYPES(x_gates.scalar_type(), "hfta_lstm_step", [&] {
        lstm_cell::forward(shape, lstm_cell::ForwardStep<scalar_t>{
                                      slice<const scalar_t>(gates, 0, 0), slice<const scalar_t>(x_gates, t, steps),
                                      cellBefore<scalar_t>(i, c0, cells, reverse),
                                      slice<scalar_t>(activations, t, steps), slice<scalar_t>(cells, t, steps),
                                      slice<scalar_t>(tanh_cells, t, steps), slice<scalar_t>(output, t, steps)});
      });
      h = output.select(1, t).contiguous();  // the next GEMM runs faster on a contiguous h
    }
    ctx->save_for_backward({h0, c0, w_hh, output, activations, cells, tanh_cells});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["bias"] = b_hh.has_value();
    ctx->set_materialize_grads(false);
    const int64_t last = timeAt(steps - 1, steps, reverse);
    return {output, output.select(1, last).clone(), cells.select(1, last).clone()};
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
    const auto grad_output = grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    // d(loss)/d(gates before their activations) at every step: the
    // gradient of x_gates itself, and of linear_hh's output.
    auto grad_gates = at::empty_like(activations);
    auto grad_h = grads[1].defined() ? grads[1].clone(at::MemoryFormat::Contiguous)
                                     : at::zeros({members, batch, hidden}, output.options());
    auto grad_c = grads[2].defined() ? grads[2].clone(at::MemoryFormat::Contiguous)
                                     : at::zeros({members, batch, hidden}, output.options());
    const lstm_cell::Shape shape{members, batch, hidden};
    for (int64_t i = steps - 1; i >= 0; --i) {
      const int64_t t = timeAt(i, steps, reverse);
      AT_DISPATCH_FLOATING_TYPES(output.scalar_type(), "hfta_lstm_step_backward", [&] {
        lstm_cell::backward(
            shape, lstm_cell::BackwardStep<scalar_t>{
                       grad_output.defined() ? slice<const scalar_t>(grad_output, t, steps)
                                             : lstm_cell::StepSlice<const scalar_t>{nullptr, 0},
                       slice<const scalar_t>(grad_h, 0, 0), slice<const scalar_t>(activations, t, steps),
                       slice<const scalar_t>(tanh_cells, t, steps), cellBefore<scalar_t>(i, c0, cells, reverse),
                       slice<scalar_t>(grad_c, 0, 0), slice<scalar_t>(grad_gates, t, steps)});
      });
      at::bmm_out(grad_h, grad_gates.select(1, t), w_hh);
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
  return x_gates.device().is_cpu() && sameFloatingType({h0, c0, w_hh, b_hh}, x_gates) && x_gates.size(1) > 0 &&
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
