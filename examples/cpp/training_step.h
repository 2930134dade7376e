#pragma once
// What the C++ examples time: one training step of a scripted module.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace examples {

// One step of plain SGD on `module`'s trainable parameters (the mean square
// of its output as the loss); returns its seconds.
inline double trainingStep(torch::jit::Module& module, const at::Tensor& x) {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : module.parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  module.forward({x}).toTensor().pow(2).mean().backward();
  torch::NoGradGuard no_grad;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad() && p.grad().defined()) p.sub_(0.01 * p.grad());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace examples
