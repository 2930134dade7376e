// Members that must not fuse are rejected with a message that names the
// member, the node or attribute with its source line, and both values.
#include <gtest/gtest.h>

#include "hfta/hfta.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

std::string fuseError(const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const auto& n : names) paths.push_back(testing::modelPath(n));
  try {
    fuse(loadMembers(paths));
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "fusing was expected to fail";
  return "";
}

void expectContains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in:\n" << message;
  }
}

TEST(Lockstep, DifferentTopologyNamesTheFirstDifferingNodeWithBothSourceLines) {
  const auto message = fuseError({"mismatch/base.pt", "mismatch/topology.pt"});
  expectContains(message, {"model 1", "mismatch/topology.pt", "model 0", "the operations differ", "aten::gelu",
                           "aten::tanh", "mlp.py:"});
}

TEST(Lockstep, DifferentParameterShapesNameTheParameterAndBothShapes) {
  const auto message = fuseError({"mismatch/base.pt", "mismatch/shape.pt"});
  expectContains(message, {"model 1", "fc1.weight", "[32, 16]", "[64, 16]"});
}

TEST(Lockstep, DifferentDtypesNameTheParameterAndBothDtypes) {
  const auto message = fuseError({"mismatch/base.pt", "mismatch/dtype.pt"});
  expectContains(message, {"fc1.weight", "Float", "Double"});
}

TEST(Lockstep, DifferentNonTensorAttributesNameTheAttribute) {
  const auto message = fuseError({"mismatch/scaled_a.pt", "mismatch/scaled_b.pt"});
  expectContains(message, {"attribute `scale` is 0.5 in one and 2.0 in the other"});
}

TEST(Lockstep, DifferentTrainingModesSayHowToFixIt) {
  const auto message = fuseError({"mismatch/base.pt", "mismatch/eval_mode.pt"});
  expectContains(message, {"training", "same mode"});
}

TEST(Lockstep, DifferentConstantsNameTheNodeAndBothValues) {
  const auto message = fuseError({"mismatch/wide_a.pt", "mismatch/wide_b.pt"});
  expectContains(message, {"argument 1 is 0.1 in one and 0.3 in the other", "`aten::leaky_relu` at", "mlp.py:"});
}

// Convolution and batch-norm settings are constants in the members' code:
// the message names the layer's line and both values.
TEST(Lockstep, DifferentConvolutionStrideNamesTheLineAndBothValues) {
  expectContains(
      fuseError({"mismatch/lenet.pt", "mismatch/lenet_stride.pt"}),
      {"argument 0 is 1 in one and 2 in the other (in the list passed as argument 3 of `aten::conv2d`)", "cnn.py:"});
}

TEST(Lockstep, DifferentConvolutionPaddingNamesTheLayerAndBothValues) {
  // nn.Conv2d keeps its padding as an attribute too: that is compared first.
  expectContains(fuseError({"mismatch/lenet.pt", "mismatch/lenet_padding.pt"}),
                 {"`conv2._reversed_padding_repeated_twice` is [0, 0, 0, 0] in one and [1, 1, 1, 1] in the other"});
}

TEST(Lockstep, DifferentKernelSizesNameTheWeightAndBothShapes) {
  expectContains(fuseError({"mismatch/lenet.pt", "mismatch/lenet_kernel.pt"}),
                 {"`conv2.weight`", "[16, 6, 5, 5]", "[16, 6, 3, 3]"});
}

TEST(Lockstep, DifferentConvolutionGroupsNameTheWeightAndBothShapes) {
  // groups divides the weight's input channels: the shapes differ first.
  expectContains(fuseError({"mismatch/lenet.pt", "mismatch/lenet_groups.pt"}),
                 {"`conv2.weight`", "[16, 6, 5, 5]", "[16, 3, 5, 5]"});
}

TEST(Lockstep, DifferentBatchNormEpsAndMomentumNameTheLineAndBothValues) {
  expectContains(fuseError({"mismatch/lenet.pt", "mismatch/lenet_eps.pt"}),
                 {"1e-05 in one and 0.001 in the other", "cnn.py:"});
  expectContains(fuseError({"mismatch/lenet.pt", "mismatch/lenet_momentum.pt"}),
                 {"0.1 in one and 0.3 in the other", "cnn.py:"});
}

TEST(Lockstep, MembersScriptedSeparatelyFromOneClassMatchDespiteNameMangling) {
  // mlp_0..2 were scripted one after another in one process: their classes
  // carry different mangled names.
  EXPECT_NO_THROW(fuse(loadMembers(testing::memberPaths("mlp"))));
}

TEST(BadInput, OneModelIsNotAnArray) {
  try {
    fuse(loadMembers({testing::modelPath("mlp_0.pt")}));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    expectContains(e.what(), {"at least 2 models", "mlp_0.pt"});
  }
}

TEST(BadInput, MissingFileAndNonArchiveAreNamed) {
  try {
    loadMembers({testing::modelPath("mlp_0.pt"), testing::modelPath("missing.pt")});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    expectContains(e.what(), {"model 1", "missing.pt", "no such file"});
  }
  try {
    loadMembers({testing::modelPath("not_a_model.pt")});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    expectContains(e.what(), {"model 0", "not_a_model.pt", "is not a model hfta reads"});
  }
}

TEST(BadInput, UnwritableOutputLeavesNothingBehind) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  EXPECT_THROW(saveModule(fused.module, "/nonexistent-folder/fused.pt"), UserError);
}

}  // namespace
}  // namespace hfta
