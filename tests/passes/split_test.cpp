// hfta::split gives member b back as a plain module with its current weights;
// a fused module saved passes the archive checks every load runs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "hfta/hfta.h"
#include "io/archive_check.h"
#include "runtime/optim/optimizers.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

using testing::allClose;

TEST(Split, EachMemberComesBackAsItWas) {
  auto paths = testing::memberPaths("wide");
  auto members = loadMembers(paths);
  auto fused = fuse(members);
  const auto x = torch::randn({5, 16});
  for (int b = 0; b < 3; ++b) {
    auto member = split(fused.module, b);
    EXPECT_FALSE(isFused(member));
    auto got = member.forward({x}).toTupleRef().elements();
    auto want = members[b].module.forward({x}).toTupleRef().elements();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(allClose(got[i].toTensor(), want[i].toTensor(), 1e-6)) << "member " << b;
    }
    EXPECT_EQ(member.named_parameters().size(), members[b].module.named_parameters().size());
  }
}

TEST(Split, CarriesTheTrainedWeightsAndSurvivesSaveAndLoad) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  std::vector<at::Tensor> params;
  for (const auto& p : fused.module.parameters()) params.push_back(p);
  optim::SGDOptions options;
  options.lr = std::vector<double>{0.1, 0.2, 0.3};
  optim::FusedSGD sgd(params, 3, options);
  const auto x = torch::randn({3, 8, 4, 4});
  fused.module.forward({x}).toTensor().pow(2).sum().backward();
  sgd.step();

  const std::string path = ::testing::TempDir() + "/hfta_split_member.pt";
  saveModule(split(fused.module, 2), path);
  auto member = torch::jit::load(path);
  std::map<std::string, at::Tensor> stacked;
  for (const auto& p : fused.module.named_parameters()) stacked[p.name] = p.value;
  ASSERT_EQ(member.named_parameters().size(), stacked.size());
  for (const auto& p : member.named_parameters()) {
    EXPECT_TRUE(allClose(p.value, stacked.at(p.name)[2], 0)) << p.name;
  }
  EXPECT_TRUE(
      allClose(member.forward({x[2]}).toTensor(), fused.module.forward({x}).toTensor()[2], testing::kForwardTolerance));
}

TEST(Split, RejectsAnIndexOutOfRangeAndAModuleHftaDidNotMake) {
  auto fused = fuse(loadMembers(testing::memberPaths("mlp")));
  EXPECT_THROW(split(fused.module, 3), UserError);
  EXPECT_THROW(split(fused.module, -1), UserError);
  EXPECT_THROW(split(torch::jit::load(testing::memberPaths("mlp")[0]), 0), UserError);
}

// What hfta writes passes the checks hfta runs on what it reads (a
// Transformer, whose debug information holds ranges past their text).
TEST(Split, ASavedFusedModulePassesTheArchiveCheck) {
  const auto fused = std::filesystem::temp_directory_path() / fmt::format("archive_check_{}.pt", ::getpid());
  saveModule(fuse(loadMembers(testing::memberPaths("bert_tiny"))).module, fused.string());
  EXPECT_NO_THROW(checkArchivePickles(fused.string(), 0));
  std::filesystem::remove(fused);
}

}  // namespace
}  // namespace hfta
