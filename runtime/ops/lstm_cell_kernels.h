// The element-wise part of one LSTM time step on the CPU, forward and
// backward, for every member and row at once (runtime/ops/lstm_steps.cpp
// runs the GEMMs around them). Private to runtime/ops.
#pragma once

#include <cstdint>

namespace hfta::ops::lstm_cell {

// Where one time step's [B, N, width] slice lies: member b's rows start
// at data + b * member_stride, each row `width` contiguous values (a
// buffer [B, T, N, width] at step t: data + t * N * width, member_stride
// T * N * width).
template <typename T>
struct StepSlice {
  T* data;
  int64_t member_stride;
  T* row(int64_t member, int64_t n, int64_t width) const { return data + member * member_stride + n * width; }
};

// Sizes of a step: B members, N rows each, H hidden units.
struct Shape {
  int64_t members, rows, hidden;
};

// Forward: pre = hh + x (each [.., 4H], gates i, f, g, o), then
// act = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o); c = f * c_prev + i * g;
// tanh_c = tanh(c); h = o * tanh_c.
template <typename T>
struct ForwardStep {
  StepSlice<const T> hh, x, c_prev;
  StepSlice<T> act, c, tanh_c, h;
};

// Backward: from dh (the output's gradient at this step plus the next
// step's, each [.., H]; dh_out may be null) and dc (the next step's
// gradient of c, updated in place to this step's gradient of c_prev),
// the gradient of pre (grad_pre, [.., 4H]).
template <typename T>
struct BackwardStep {
  StepSlice<const T> dh_out, dh_next, act, tanh_c, c_prev;
  StepSlice<T> dc, grad_pre;
};

// In the build for this CPU (runtime/cpu_isa.h).
void forward(const Shape& shape, const ForwardStep<float>& step);
void forward(const Shape& shape, const ForwardStep<double>& step);
void backward(const Shape& shape, const BackwardStep<float>& step);
void backward(const Shape& shape, const BackwardStep<double>& step);

}  // namespace hfta::ops::lstm_cell
