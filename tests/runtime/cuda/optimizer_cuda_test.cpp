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

// A member whose gradients turn NaN, frozen as hfta-train freezes it: it
// keeps the parameters it had, is reported frozen, and the others train on.
TEST_P(TorchOptimCaseCuda, ANanMemberIsFrozenAndTheOthersTrainOn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchOptim(GetParam().fused, GetParam().alone, torch::kCUDA, {/*member=*/1, /*step=*/3});
}

TEST(FusedAdadeltaCuda, KernelMatchesTorchOptimAdadeltaPerMember) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareAdadeltaWithTorchOptim(torch::kCUDA);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchOptimCaseCuda, ::testing::ValuesIn(torchOptimCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hfta::optim::testing
