// FusedGradScaler's CUDA unscale (one multi-tensor launch) with the CUDA
// optimizer kernels, against torch.amp.GradScaler per member (on the CPU).
// Registered with ctest only where a GPU was found.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/runtime/grad_scaler_comparison.h"

namespace hfta::optim::testing {
namespace {

class GradScalerCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(GradScalerCuda, PerMemberScalesSkipsAndParametersMatchTorchAmpGradScaler) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  compareWithTorchGradScaler(GetParam(), torch::kCUDA);
}

INSTANTIATE_TEST_SUITE_P(References, GradScalerCuda,
                         ::testing::Values("scaler_sgd", "scaler_adam", "scaler_sgd_clipped"));

}  // namespace
}  // namespace hfta::optim::testing
