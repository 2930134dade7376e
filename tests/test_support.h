#pragma once
// Shared by the GoogleTest suites: where the test setup put the members and
// PyTorch's reference answers, and how tensors are compared.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <string>

namespace hfta::testing {

// Tolerances for float32 (stated in README.md): the fused form sums in a
// different order (bmm vs mm), which moves the last bits only.
constexpr double kForwardTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-5;
constexpr double kTrainedTolerance = 1e-4;  // after 20 optimizer steps

// The folder written by tests/python/make_test_models.py.
std::string modelsDir();
std::string modelPath(const std::string& name);
std::vector<std::string> memberPaths(const std::string& kind, int members = 3);

// A dict of PyTorch's answers written by torch.save in the test setup.
class Reference {
 public:
  Reference() = default;
  explicit Reference(const std::string& name);
  at::Tensor tensor(const std::string& key) const;
  // A nested {name: tensor} dict, e.g. the gradients by parameter name.
  std::map<std::string, at::Tensor> tensors(const std::string& key) const;

 private:
  c10::IValue dict_;
};

// gtest assertion: same shape and |a - b| <= tol * (1 + |b|) everywhere.
::testing::AssertionResult allClose(const at::Tensor& actual, const at::Tensor& expected,
                                    double tolerance);

}  // namespace hfta::testing
