#pragma once
// The body of the CPU driver, compiled once per instruction set: included
// by cpu_kernels_<isa>.cpp with CPU_CAPABILITY set (ATen's convention, which
// also keys the namespace of at::vec::Vectorized), so that the builds do not
// mix.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "runtime/optim/cpu_loop.h"

namespace hfta::optim::rules {

template <typename T>
struct Math<at::vec::Vectorized<T>> {
  using V = at::vec::Vectorized<T>;
  static V constant(double x) { return V(static_cast<T>(x)); }
  static V sqrt(const V& x) { return x.sqrt(); }
  static V max(const V& a, const V& b) { return at::vec::maximum(a, b); }
};

}  // namespace hfta::optim::rules

namespace hfta::optim::cpu {
inline namespace CPU_CAPABILITY {

// body(b, begin, end) for the element range [begin, end) of member b.
template <typename Body>
void forEachMemberRange(int64_t members, int64_t member_numel, const Body& body) {
  constexpr int64_t kGrain = 1 << 15;
  at::parallel_for(0, members * member_numel, kGrain, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t b = begin / member_numel;
      const int64_t stop = std::min(end, (b + 1) * member_numel);
      body(b, begin, stop);
      begin = stop;
    }
  });
}

// Elements [begin, end) with V = `Math` type: a SIMD vector or a scalar.
template <typename Rule, typename V, int kWidth, typename scalar_t, typename Load, typename Store>
int64_t updateRange(scalar_t* p, const scalar_t* g, const std::array<scalar_t*, rules::kMaxStates>& s, int64_t begin,
                    int64_t end, const typename Rule::Scalars& sc, const Load& load, const Store& store) {
  int64_t k = begin;
  for (; k + kWidth <= end; k += kWidth) {
    V state[rules::kMaxStates];
    for (int j = 0; j < rules::kMaxStates; ++j) {
      if (s[j] != nullptr) state[j] = load(s[j] + k);
    }
    V param = load(p + k);
    Rule::template apply<V>(param, load(g + k), state, sc);
    store(param, p + k);
    for (int j = 0; j < rules::kMaxStates; ++j) {
      if (s[j] != nullptr) store(state[j], s[j] + k);
    }
  }
  return k;
}

template <typename Rule>
void updateWith(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states,
                const std::vector<typename Rule::Scalars>& scalars, const std::vector<uint8_t>& idle) {
  const int64_t members = static_cast<int64_t>(scalars.size());
  const int64_t member_numel = param.numel() / members;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, param.scalar_type(), "hfta_optimizer_step", [&] {
    using acc = at::opmath_type<scalar_t>;
    scalar_t* p = param.data_ptr<scalar_t>();
    const scalar_t* g = grad.data_ptr<scalar_t>();
    std::array<scalar_t*, rules::kMaxStates> s{};
    for (int j = 0; j < rules::kMaxStates; ++j) s[j] = states[j] ? states[j]->data_ptr<scalar_t>() : nullptr;
    forEachMemberRange(members, member_numel, [&](int64_t b, int64_t begin, int64_t end) {
      if (idle[b] != 0) return;
      const auto sc = scalars[b];
      int64_t k = begin;
      if constexpr (std::is_same_v<scalar_t, acc>) {  // float, double: SIMD vectors
        using Vec = at::vec::Vectorized<acc>;
        k = updateRange<Rule, Vec, Vec::size()>(
            p, g, s, begin, end, sc, [](const acc* x) { return Vec::loadu(x); },
            [](const Vec& v, acc* x) { v.store(x); });
      }
      updateRange<Rule, acc, 1>(
          p, g, s, k, end, sc, [](const scalar_t* x) { return static_cast<acc>(*x); },
          [](acc v, scalar_t* x) { *x = static_cast<scalar_t>(v); });
    });
  });
}

// The loss scaler's unscale: member b's elements times inv_scale[b] (in
// the math type, as at::_amp_foreach_non_finite_check_and_unscale_ does for
// one scale), and found[b] = 1 where one of them is not finite.
void unscaleWith(at::Tensor& grad, const std::vector<float>& inv_scale, std::atomic<uint8_t>* found) {
  const int64_t members = static_cast<int64_t>(inv_scale.size());
  const int64_t member_numel = grad.numel() / members;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "hfta_unscale", [&] {
    using acc = at::opmath_type<scalar_t>;
    scalar_t* g = grad.data_ptr<scalar_t>();
    forEachMemberRange(members, member_numel, [&](int64_t b, int64_t begin, int64_t end) {
      const acc inv = inv_scale[b];
      bool finite = true;
      int64_t k = begin;
      if constexpr (std::is_same_v<scalar_t, acc>) {  // float, double: SIMD vectors
        using Vec = at::vec::Vectorized<acc>;
        // x - x is 0 where x is finite and NaN elsewhere; a NaN stays in the sum.
        Vec nonfinite(acc(0));
        for (; k + Vec::size() <= end; k += Vec::size()) {
          const Vec v = Vec::loadu(g + k);
          nonfinite = nonfinite + (v - v);
          (inv == acc(1) ? v : v * Vec(inv)).store(g + k);
        }
        acc lanes[Vec::size()];
        nonfinite.store(lanes);
        for (acc lane : lanes) finite = finite && !std::isnan(lane);
      }
      for (; k < end; ++k) {
        const auto v = static_cast<acc>(g[k]);
        finite = finite && std::isfinite(v);
        g[k] = static_cast<scalar_t>(inv == acc(1) ? v : v * inv);
      }
      if (!finite) found[b].store(1, std::memory_order_relaxed);
    });
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace hfta::optim::cpu
