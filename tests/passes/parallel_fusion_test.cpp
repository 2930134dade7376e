// hfta::fuseParallel against the ensemble it rewrites, scripted from Python
// (examples/ensemble.py): the rewritten module's outputs and every member's
// gradients (on its slice of the stacked parameters) are PyTorch's, computed
// in eager mode by the test setup.
#include <gtest/gtest.h>
#include <torch/script.h>

#include "hfta/parallel.h"
#include "io/tensor_slots.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

class ParallelFusion : public ::testing::TestWithParam<std::string> {};

TEST_P(ParallelFusion, OutputsAndGradientsAreTheEnsemblesOwn) {
  const std::string name = "ensemble_" + GetParam();
  auto module = torch::jit::load(testing::modelPath(name + ".pt"));
  const auto report = fuseParallel(module);
  ASSERT_EQ(report.fused.size(), 1u) << report.text();
  const testing::Reference ref(name + "_reference.pt");
  const auto out = module.forward({ref.tensor("x")}).toTensor();
  EXPECT_TRUE(testing::allClose(out, ref.tensor("outputs"), testing::kForwardTolerance));
  out.pow(2).sum().backward();
  const auto grads = ref.tensors("grads");
  const auto fused = module.attr(report.fused[0].fused).toModule();
  const double scale = testing::gradientScale(grads);
  size_t checked = 0;
  for (const auto& p : distinctNamedParameters(fused)) {  // a tied weight once, as Python names it
    for (int64_t b = 0; b < p.value.size(0); ++b) {
      const auto key = std::to_string(b) + "." + p.name;
      ASSERT_TRUE(grads.count(key)) << key;
      EXPECT_TRUE(testing::allClose(p.value.grad()[b], grads.at(key), testing::kGradientTolerance, scale)) << key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, grads.size());
}

INSTANTIATE_TEST_SUITE_P(Ensembles, ParallelFusion,
                         ::testing::Values("mlp_averaged_b5", "lenet_stacked_b3", "tied_averaged_b3"));

}  // namespace
}  // namespace hfta
