// The CUDA multi-tensor kernel of every fused optimizer against separate
// torch::optim optimizers (on the CPU). Registered with ctest only where a
// GPU was found.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/runtime/optimizer_comparison.h"

namespace hfta::optim::testing {
namespace {

class TorchOptimCaseCuda : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(TorchOptimCaseCuda, KernelMatchesSeparateTorchOptimizers) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(GetParam().fused, GetParam().alone, torch::kCUDA);
}

TEST_P(TorchOptimCaseCuda, ANanMemberLeavesTheOthersUntouched) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(GetParam().fused, GetParam().alone, torch::kCUDA, [](int step, const at::Tensor& grad) {
    auto g = grad.clone();
    if (step == 3) g[1].fill_(std::numeric_limits<float>::quiet_NaN());
    return g;
  });
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchOptimCaseCuda, ::testing::ValuesIn(torchOptimCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hfta::optim::testing
