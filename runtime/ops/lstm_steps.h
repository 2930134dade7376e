// One LSTM layer in one direction over B members' stacked weights, each
// time step in a few whole-array ATen calls and the backward written out
// (runtime/ops/lstm_steps.cpp). Private to runtime/ops.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace hfta::ops {

// Whether lstmSteps runs these tensors: float32 or float64 alike on the
// CPU, outside autocast, at least one step. Projected LSTMs (proj_size)
// and everything else step op by op (recurrent_ops.cpp).
bool lstmStepsApplies(const at::Tensor& x_gates, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_hh,
                      const at::Tensor& b_hh);

// x_gates [B, T, N, 4H]: every step's input projection, linear_ih(x) with
// b_ih; h0, c0 [B, N, H]; w_hh [B, 4H, H]; b_hh [B, 4H] or undefined.
// Steps t = 0..T-1, or T-1..0 with `reverse`. Returns the output [B, T, N,
// H] (h at every t) and the last step's h and c, [B, N, H].
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmSteps(const at::Tensor& x_gates, const at::Tensor& h0,
                                                         const at::Tensor& c0, const at::Tensor& w_hh,
                                                         const at::Tensor& b_hh, bool reverse);

}  // namespace hfta::ops
