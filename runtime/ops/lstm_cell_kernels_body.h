#pragma once
// The body of the LSTM step's element-wise kernels, compiled once per
// instruction set: included by lstm_cell_kernels_<isa>.cpp with
// CPU_CAPABILITY set (ATen's convention, which also keys the namespace of
// at::vec::Vectorized), so that the builds do not mix.
//
// sigmoid is 1 / (1 + exp(-x)), the form of ATen's sigmoid kernel, with
// Vectorized's exp (Sleef's, within 1 ulp). tanh is not
// Vectorized's: Sleef's tanh took a fifth of a forward step, more than
// the step's GEMM, and its expm1 two thirds of that. It is
// tanh|x| = (1 - e) / (1 + e), e = exp(-2|x|), with x's sign: within a
// few ulp of 1 in absolute terms, as 2 sigmoid(2x) - 1 would be (near 0,
// not relative to x). (Alone on the CPU a float32 member runs oneDNN's
// LSTM, whose gates have approximations of their own.)
// Each row's last H % lanes values go through the same vector code on a
// partial load.
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>

#include "runtime/ops/lstm_cell_kernels.h"

namespace hfta::ops::lstm_cell {
inline namespace CPU_CAPABILITY {

template <typename T>
using Vec = at::vec::Vectorized<T>;

template <typename T>
Vec<T> sigmoid(const Vec<T>& x) {
  return (Vec<T>(T(1)) + (Vec<T>(T(0)) - x).exp()).reciprocal();
}

template <typename T>
Vec<T> tanh(const Vec<T>& x) {
  const Vec<T> one(T(1));
  const auto e = (Vec<T>(T(-2)) * x.abs()).exp();
  return ((one - e) / (one + e)).copysign(x);
}

// The rows of all members, a task per about 32K gate values (ATen's grain
// for element-wise work), so that a small step runs on the calling thread.
template <typename Row>
void forEachRow(const Shape& s, const Row& row) {
  const int64_t grain = std::max<int64_t>(1, 32768 / (4 * s.hidden));
  at::parallel_for(0, s.members * s.rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r / s.rows, r % s.rows);
  });
}

template <typename T>
void forwardStep(const Shape& s, const ForwardStep<T>& step) {
  const int64_t H = s.hidden;
  forEachRow(s, [&](int64_t b, int64_t n) {
    const T* hh = step.hh.row(b, n, 4 * H);
    const T* x = step.x.row(b, n, 4 * H);
    const T* c_prev = step.c_prev.row(b, n, H);
    T* act = step.act.row(b, n, 4 * H);
    T* c = step.c.row(b, n, H);
    T* tanh_c = step.tanh_c.row(b, n, H);
    T* h = step.h.row(b, n, H);
    for (int64_t j = 0; j < H; j += Vec<T>::size()) {
      const auto count = static_cast<int>(std::min<int64_t>(Vec<T>::size(), H - j));
      auto pre = [&](int64_t gate) {
        return Vec<T>::loadu(hh + gate * H + j, count) + Vec<T>::loadu(x + gate * H + j, count);
      };
      const auto i = sigmoid(pre(0)), f = sigmoid(pre(1)), g = tanh(pre(2)), o = sigmoid(pre(3));
      const auto c_next = f * Vec<T>::loadu(c_prev + j, count) + i * g;
      const auto t = tanh(c_next);
      i.store(act + j, count);
      f.store(act + H + j, count);
      g.store(act + 2 * H + j, count);
      o.store(act + 3 * H + j, count);
      c_next.store(c + j, count);
      t.store(tanh_c + j, count);
      (o * t).store(h + j, count);
    }
  });
}

template <typename T>
void backwardStep(const Shape& s, const BackwardStep<T>& step) {
  const int64_t H = s.hidden;
  const Vec<T> one(T(1));
  forEachRow(s, [&](int64_t b, int64_t n) {
    const T* dh_out = step.dh_out.data != nullptr ? step.dh_out.row(b, n, H) : nullptr;
    const T* dh_next = step.dh_next.row(b, n, H);
    const T* act = step.act.row(b, n, 4 * H);
    const T* tanh_c = step.tanh_c.row(b, n, H);
    const T* c_prev = step.c_prev.row(b, n, H);
    T* dc = step.dc.row(b, n, H);
    T* grad = step.grad_pre.row(b, n, 4 * H);
    for (int64_t j = 0; j < H; j += Vec<T>::size()) {
      const auto count = static_cast<int>(std::min<int64_t>(Vec<T>::size(), H - j));
      auto dh = Vec<T>::loadu(dh_next + j, count);
      if (dh_out != nullptr) dh = Vec<T>::loadu(dh_out + j, count) + dh;
      const auto i = Vec<T>::loadu(act + j, count), f = Vec<T>::loadu(act + H + j, count);
      const auto g = Vec<T>::loadu(act + 2 * H + j, count), o = Vec<T>::loadu(act + 3 * H + j, count);
      const auto t = Vec<T>::loadu(tanh_c + j, count);
      // autograd's: tanh_backward is grad * (1 - y^2), sigmoid_backward
      // grad * (1 - y) * y.
      const auto dc_total = Vec<T>::loadu(dc + j, count) + dh * o * (one - t * t);
      (dc_total * g * (one - i) * i).store(grad + j, count);
      (dc_total * Vec<T>::loadu(c_prev + j, count) * (one - f) * f).store(grad + H + j, count);
      (dc_total * i * (one - g * g)).store(grad + 2 * H + j, count);
      (dh * t * (one - o) * o).store(grad + 3 * H + j, count);
      (dc_total * f).store(dc + j, count);
    }
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace hfta::ops::lstm_cell

// The entry points of this build, in namespace lstm_cell::<ISA>.
#define HFTA_LSTM_CELL_BUILD(ISA)                                                            \
  namespace hfta::ops::lstm_cell::ISA {                                                      \
  void forward(const Shape& s, const ForwardStep<float>& step) { forwardStep(s, step); }     \
  void forward(const Shape& s, const ForwardStep<double>& step) { forwardStep(s, step); }    \
  void backward(const Shape& s, const BackwardStep<float>& step) { backwardStep(s, step); }  \
  void backward(const Shape& s, const BackwardStep<double>& step) { backwardStep(s, step); } \
  }
