#pragma once
// Each fused optimizer's update of one element, written once and run by two
// drivers: the CPU loop (cpu_loop.h) and the CUDA multi-tensor kernel
// (multi_tensor_cuda.cu). `acc` is the math type (float for float, half and
// bfloat16; double for double); `state` holds the optimizer's state
// elements, loaded before and stored after; the scalars are one member's
// (one parameter's, for step-dependent ones), computed on the host.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HFTA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HFTA_HOST_DEVICE inline
#endif

namespace hfta::optim::rules {

// Which state slots a rule uses is decided per parameter (e.g. no momentum
// buffer when no member has momentum); unused slots are never read.
constexpr int kMaxStates = 3;

// torch::optim::SGD. state[0]: momentum buffer.
struct Sgd {
  struct Scalars {
    double lr, momentum, keep, weight_decay;  // keep = 1 - dampening (1 without momentum)
    bool nesterov, first, has_buffer;
  };
  template <typename acc>
  static HFTA_HOST_DEVICE void apply(acc& p, acc g, acc* state, const Scalars& s) {
    acc d = g + static_cast<acc>(s.weight_decay) * p;
    if (s.has_buffer) {
      const acc momentum = static_cast<acc>(s.momentum);
      const acc buf = s.first ? d : momentum * state[0] + static_cast<acc>(s.keep) * d;
      state[0] = buf;
      d = s.nesterov ? d + momentum * buf : buf;
    }
    p = p - static_cast<acc>(s.lr) * d;
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
  template <typename acc>
  static HFTA_HOST_DEVICE void apply(acc& p, acc g, acc* state, const Scalars& s) {
    p = p * static_cast<acc>(s.decay);
    g = g + static_cast<acc>(s.l2) * p;
    const acc beta1 = static_cast<acc>(s.beta1), beta2 = static_cast<acc>(s.beta2);
    state[0] = beta1 * state[0] + (acc(1) - beta1) * g;
    state[1] = beta2 * state[1] + (acc(1) - beta2) * g * g;
    acc second = state[1];
    if (s.amsgrad) {
      second = state[2] > second ? state[2] : second;
      state[2] = second;
    }
    const acc denom = std::sqrt(second) / static_cast<acc>(s.bias_correction2_sqrt) + static_cast<acc>(s.eps);
    p = p - static_cast<acc>(s.step_size) * (state[0] / denom);
  }
};

// torch::optim::Adagrad. state[0]: sum of squared gradients.
struct Adagrad {
  struct Scalars {
    double clr;  // lr / (1 + (t - 1) * lr_decay)
    double weight_decay, eps;
  };
  template <typename acc>
  static HFTA_HOST_DEVICE void apply(acc& p, acc g, acc* state, const Scalars& s) {
    const acc d = g + static_cast<acc>(s.weight_decay) * p;
    state[0] = state[0] + d * d;
    p = p - static_cast<acc>(s.clr) * (d / (std::sqrt(state[0]) + static_cast<acc>(s.eps)));
  }
};

// torch::optim::RMSprop. state: square_avg, grad_avg (centered),
// momentum buffer.
struct RMSprop {
  struct Scalars {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered;
  };
  template <typename acc>
  static HFTA_HOST_DEVICE void apply(acc& p, acc g, acc* state, const Scalars& s) {
    const acc alpha = static_cast<acc>(s.alpha);
    const acc d = g + static_cast<acc>(s.weight_decay) * p;
    state[0] = alpha * state[0] + (acc(1) - alpha) * d * d;
    acc avg;
    if (s.centered) {
      state[1] = alpha * state[1] + (acc(1) - alpha) * d;
      avg = std::sqrt(state[0] - state[1] * state[1]) + static_cast<acc>(s.eps);
    } else {
      avg = std::sqrt(state[0]) + static_cast<acc>(s.eps);
    }
    if (s.momentum > 0) {
      state[2] = static_cast<acc>(s.momentum) * state[2] + d / avg;
      p = p - static_cast<acc>(s.lr) * state[2];
    } else {
      p = p - static_cast<acc>(s.lr) * (d / avg);
    }
  }
};

// torch.optim.Adadelta. state: square_avg, acc_delta.
struct Adadelta {
  struct Scalars {
    double lr, rho, eps, weight_decay;
  };
  template <typename acc>
  static HFTA_HOST_DEVICE void apply(acc& p, acc g, acc* state, const Scalars& s) {
    const acc rho = static_cast<acc>(s.rho), eps = static_cast<acc>(s.eps);
    const acc d = g + static_cast<acc>(s.weight_decay) * p;
    state[0] = rho * state[0] + (acc(1) - rho) * d * d;
    const acc delta = std::sqrt(state[1] + eps) / std::sqrt(state[0] + eps) * d;
    state[1] = rho * state[1] + (acc(1) - rho) * delta * delta;
    p = p - static_cast<acc>(s.lr) * delta;
  }
};

}  // namespace hfta::optim::rules
