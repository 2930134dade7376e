#pragma once
// The CPU driver of the update rules (update_rules.h): one pass over a
// stacked [B, ...] parameter, each member's range with that member's
// scalars, ranges in parallel, SIMD vectors of elements at a time. Built
// twice (cpu_kernels_default.cpp, cpu_kernels_avx2.cpp); the AVX2 build is
// used where the CPU has AVX2 and FMA, unless the environment variable
// ATEN_CPU_CAPABILITY=default (ATen's own switch, read once) asks for the
// build that runs on any x86-64, as it does of ATen's kernels.
#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <vector>

#include "runtime/optim/update_rules.h"

namespace hfta::optim::cpu {

// Applies Rule to every element of `param` (contiguous, [B, ...]) with
// member b's scalars[b], except the members marked in `idle`; `states`
// are the state tensors by slot (nullptr where the rule does not use the
// slot for this parameter).
// "AVX2" or "DEFAULT": the build update() runs.
const char* capability();

// Multiplies member b's elements of `grad` (contiguous, [B, ...]) by
// inv_scale[b] and sets found[b] to 1 if one of them is not finite.
void unscale(at::Tensor& grad, const std::vector<float>& inv_scale, std::atomic<uint8_t>* found);

template <typename Rule>
void update(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states,
            const std::vector<typename Rule::Scalars>& scalars, const std::vector<uint8_t>& idle);

}  // namespace hfta::optim::cpu
