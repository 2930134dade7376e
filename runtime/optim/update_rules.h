#pragma once
// Each fused optimizer's update of one element, written once and run by two
// drivers: the CPU loop (cpu_kernels.h, on a SIMD vector of elements at a
// time) and the CUDA multi-tensor kernel (multi_tensor_cuda.cu, one element
// per thread). `V` is the math type: float or double, or a SIMD vector of
// them (at::vec::Vectorized); Math<V> gives it sqrt, max and constants.
// `state` holds the optimizer's state elements, loaded before and stored
// after; the scalars are one member's (one parameter's, for step-dependent
// ones), computed on the host.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HFTA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HFTA_HOST_DEVICE inline
#endif

namespace hfta::optim::rules {

// Scalar math; cpu_kernels.h specializes it for SIMD vectors.
template <typename V>
struct Math {
  static HFTA_HOST_DEVICE V constant(double x) { return static_cast<V>(x); }
  static HFTA_HOST_DEVICE V sqrt(V x) { return std::sqrt(x); }
  static HFTA_HOST_DEVICE V max(V a, V b) { return a > b ? a : b; }
};

// Which state slots a rule uses is decided per parameter (e.g. no momentum
// buffer when no member has momentum); unused slots are never read.
constexpr int kMaxStates = 3;

// torch::optim::SGD. state[0]: momentum buffer.
struct Sgd {
  struct Scalars {
    double lr, momentum, keep, weight_decay;  // keep = 1 - dampening (1 without momentum)
    bool nesterov, first, has_buffer;
  };
  template <typename V>
  static HFTA_HOST_DEVICE void apply(V& p, V g, V* state, const Scalars& s) {
    using M = Math<V>;
    V d = g + M::constant(s.weight_decay) * p;
    if (s.has_buffer) {
      const V momentum = M::constant(s.momentum);
      const V buf = s.first ? d : momentum * state[0] + M::constant(s.keep) * d;
      state[0] = buf;
      d = s.nesterov ? d + momentum * buf : buf;
    }
    p = p - M::constant(s.lr) * d;
  }
};

// torch::optim::Adam / AdamW. state: exp_avg, exp_avg_sq, max_exp_avg_sq.
struct Adam {
  struct Scalars {
    double step_size;              // lr / (1 - beta1^t)
    double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
    double beta1, beta2, eps;
    double l2;     // Adam's weight decay (added to the gradient)
    double decay;  // AdamW's factor 1 - lr * weight_decay (1 for Adam)
    bool amsgrad;
  };
  template <typename V>
  static HFTA_HOST_DEVICE void apply(V& p, V g, V* state, const Scalars& s) {
    using M = Math<V>;
    p = p * M::constant(s.decay);
    g = g + M::constant(s.l2) * p;
    const V beta1 = M::constant(s.beta1), beta2 = M::constant(s.beta2);
    state[0] = beta1 * state[0] + M::constant(1.0 - s.beta1) * g;
    state[1] = beta2 * state[1] + M::constant(1.0 - s.beta2) * g * g;
    V second = state[1];
    if (s.amsgrad) {
      second = M::max(state[2], second);
      state[2] = second;
    }
    const V denom = M::sqrt(second) / M::constant(s.bias_correction2_sqrt) + M::constant(s.eps);
    p = p - M::constant(s.step_size) * (state[0] / denom);
  }
};

// torch::optim::Adagrad. state[0]: sum of squared gradients.
struct Adagrad {
  struct Scalars {
    double clr;  // lr / (1 + (t - 1) * lr_decay)
    double weight_decay, eps;
  };
  template <typename V>
  static HFTA_HOST_DEVICE void apply(V& p, V g, V* state, const Scalars& s) {
    using M = Math<V>;
    const V d = g + M::constant(s.weight_decay) * p;
    state[0] = state[0] + d * d;
    p = p - M::constant(s.clr) * (d / (M::sqrt(state[0]) + M::constant(s.eps)));
  }
};

// torch::optim::RMSprop. state: square_avg, grad_avg (centered),
// momentum buffer.
struct RMSprop {
  struct Scalars {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered;
  };
  template <typename V>
  static HFTA_HOST_DEVICE void apply(V& p, V g, V* state, const Scalars& s) {
    using M = Math<V>;
    const V alpha = M::constant(s.alpha);
    const V d = g + M::constant(s.weight_decay) * p;
    state[0] = alpha * state[0] + M::constant(1.0 - s.alpha) * d * d;
    V avg;
    if (s.centered) {
      state[1] = alpha * state[1] + M::constant(1.0 - s.alpha) * d;
      avg = M::sqrt(state[0] - state[1] * state[1]) + M::constant(s.eps);
    } else {
      avg = M::sqrt(state[0]) + M::constant(s.eps);
    }
    if (s.momentum > 0) {
      state[2] = M::constant(s.momentum) * state[2] + d / avg;
      p = p - M::constant(s.lr) * state[2];
    } else {
      p = p - M::constant(s.lr) * (d / avg);
    }
  }
};

// torch.optim.Adadelta. state: square_avg, acc_delta.
struct Adadelta {
  struct Scalars {
    double lr, rho, eps, weight_decay;
  };
  template <typename V>
  static HFTA_HOST_DEVICE void apply(V& p, V g, V* state, const Scalars& s) {
    using M = Math<V>;
    const V rho = M::constant(s.rho), eps = M::constant(s.eps);
    const V d = g + M::constant(s.weight_decay) * p;
    state[0] = rho * state[0] + M::constant(1.0 - s.rho) * d * d;
    const V delta = M::sqrt(state[1] + eps) / M::sqrt(state[0] + eps) * d;
    state[1] = rho * state[1] + M::constant(1.0 - s.rho) * delta * delta;
    p = p - M::constant(s.lr) * delta;
  }
};

}  // namespace hfta::optim::rules

// Every rule, for the drivers' explicit instantiations: X(Rule) per rule.
#define HFTA_FOR_EACH_UPDATE_RULE(X) X(Sgd) X(Adam) X(Adagrad) X(RMSprop) X(Adadelta)
