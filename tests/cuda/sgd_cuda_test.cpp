// The CUDA kernel of FusedSGD against separate torch::optim::SGD optimizers
// (on the CPU). Registered with ctest only where a GPU was found.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/sgd_comparison.h"

namespace hfta::optim::testing {
namespace {

TEST(FusedSGDCuda, KernelMatchesSeparateTorchOptimizers) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(perMemberCase(), torch::kCUDA);
}

TEST(FusedSGDCuda, ANanMemberLeavesTheOthersUntouched) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(perMemberCase(), torch::kCUDA, [](int step, const at::Tensor& grad) {
    auto g = grad.clone();
    if (step == 3) g[1].fill_(std::numeric_limits<float>::quiet_NaN());
    return g;
  });
}

}  // namespace
}  // namespace hfta::optim::testing
