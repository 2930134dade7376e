// A tensor a member holds under several names (the word LM of
// examples/text.py with tied=True: decoder.weight = embedding.weight, as
// GPT-2 does) is one stacked tensor in the fused module, one tensor again
// in a member split out, and through a save; members must tie alike.
// (FusionEquivalence and TransformerTraining check lm_tiny_tied's forward,
// gradients and optimizer steps against PyTorch.)
#include <gtest/gtest.h>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

const c10::TensorImpl* implAt(const torch::jit::Module& m, const std::string& child, const std::string& name) {
  return m.attr(child).toModule().attr(name).toTensor().unsafeGetTensorImpl();
}

bool decoderTiedToEmbedding(const torch::jit::Module& m) {
  return implAt(m, "decoder", "weight") == implAt(m, "embedding", "weight");
}

class TiedWeights : public ::testing::Test {
 protected:
  std::vector<Member> members_ = loadMembers(testing::memberPaths("lm_tiny_tied"));
  FusionResult fused_ = fuse(members_);
};

TEST_F(TiedWeights, AreOneStackedTensorInTheFusedModule) {
  ASSERT_TRUE(decoderTiedToEmbedding(members_[0].module));
  EXPECT_TRUE(decoderTiedToEmbedding(fused_.module));
  EXPECT_EQ(distinctParameters(fused_.module).size(), distinctParameters(members_[0].module).size());
  EXPECT_TRUE(fused_.report.fallbacks.empty()) << fused_.report.text();
}

TEST_F(TiedWeights, StayTiedThroughSaveAndSplit) {
  const std::string path = ::testing::TempDir() + "/hfta_tied_fused.pt";
  saveModule(fused_.module, path);
  const auto loaded = torch::jit::load(path);
  EXPECT_TRUE(decoderTiedToEmbedding(loaded));
  for (int64_t b = 0; b < 3; ++b) {
    const auto member = split(loaded, b);
    EXPECT_TRUE(decoderTiedToEmbedding(member)) << "member " << b;
    EXPECT_TRUE(testing::allClose(member.attr("embedding").toModule().attr("weight").toTensor(),
                                  members_[b].module.attr("embedding").toModule().attr("weight").toTensor(), 0));
  }
}

TEST(TiedWeightsMismatch, MembersThatTieDifferentlyAreRefusedNamingBoth) {
  auto members = loadMembers(testing::memberPaths("lm_tiny_tied"));
  // Member 2 unties its decoder (its own copy of the weight).
  auto decoder = members[2].module.attr("decoder").toModule();
  decoder.setattr("weight", decoder.attr("weight").toTensor().detach().clone().requires_grad_());
  try {
    fuse(members);
    FAIL() << "fused members that tie differently";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("`embedding.weight` and `decoder.weight` are one tensor (tied) in model 0"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("two tensors in model 2"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace hfta
