#pragma once
// The CPU driver of the update rules: one pass over a stacked [B, ...]
// parameter, each member's range of elements with that member's scalars,
// ranges in parallel. The loop body is the rule's arithmetic on values
// loaded from restrict pointers, which the compiler vectorizes.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <vector>

#include "runtime/optim/update_rules.h"

namespace hfta::optim {

// body(b, begin, end) for the element range [begin, end) of member b.
template <typename Body>
void forEachMemberRange(int64_t members, int64_t member_numel, const Body& body) {
  constexpr int64_t kGrain = 1 << 14;
  at::parallel_for(0, members * member_numel, kGrain, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t b = begin / member_numel;
      const int64_t stop = std::min(end, (b + 1) * member_numel);
      body(b, begin, stop);
      begin = stop;
    }
  });
}

// Applies Rule to every element of `param` (contiguous, [B, ...]) with
// member b's scalars[b]; `states` are the state tensors by slot (nullptr
// where the rule does not use the slot for this parameter).
template <typename Rule>
void updateOnCpu(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states,
                 const std::vector<typename Rule::Scalars>& scalars) {
  const int64_t members = static_cast<int64_t>(scalars.size());
  const int64_t member_numel = param.numel() / members;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, param.scalar_type(), "hfta_optimizer_step", [&] {
    using acc = at::opmath_type<scalar_t>;
    scalar_t* __restrict__ p = param.data_ptr<scalar_t>();
    const scalar_t* __restrict__ g = grad.data_ptr<scalar_t>();
    std::array<scalar_t*, rules::kMaxStates> s{};
    for (int j = 0; j < rules::kMaxStates; ++j) s[j] = states[j] ? states[j]->data_ptr<scalar_t>() : nullptr;
    forEachMemberRange(members, member_numel, [&](int64_t b, int64_t begin, int64_t end) {
      const auto sc = scalars[b];
      for (int64_t k = begin; k < end; ++k) {
        acc st[rules::kMaxStates] = {};
        for (int j = 0; j < rules::kMaxStates; ++j) {
          if (s[j] != nullptr) st[j] = s[j][k];
        }
        acc pk = p[k];
        Rule::template apply<acc>(pk, static_cast<acc>(g[k]), st, sc);
        p[k] = pk;
        for (int j = 0; j < rules::kMaxStates; ++j) {
          if (s[j] != nullptr) s[j][k] = st[j];
        }
      }
    });
  });
}

}  // namespace hfta::optim
