// The array-size planner: measures B = 1, 2, 4, ... and picks the fastest,
// and a later plan for the same graph and machine comes from its cache.
#include "tune/array_planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/atomic_file.h"
#include "tests/test_support.h"

namespace hfta::tune {
namespace {

train::RunConfig digits() {
  train::RunConfig c;
  c.model = testing::modelPath("digits_0.pt");
  c.dataset = "synthetic";
  c.options.batch_size = 32;
  c.hyper.emplace("lr", PerMember(0.01));
  return c;
}

class ArrayPlanner : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ =
        (std::filesystem::temp_directory_path() / fmt::format("hfta_plans_{}", ::getpid()) / "plans.json").string();
  }
  void TearDown() override { removeTree(std::filesystem::path(cache_).parent_path().string()); }
  std::string cache_;
};

TEST_F(ArrayPlanner, PicksTheFastestMeasuredSizeAndCachesIt) {
  const auto plan = planArraySize(digits(), 4, cache_);
  ASSERT_FALSE(plan.cached);
  ASSERT_FALSE(plan.measured.empty());
  EXPECT_EQ(plan.measured[0].array_size, 1);
  double best = 0;
  int64_t fastest = 0;
  for (size_t i = 0; i < plan.measured.size(); ++i) {
    const auto [b, rate, peak] = plan.measured[i];
    EXPECT_EQ(b, int64_t{1} << i);  // doublings, within the cap
    EXPECT_LE(b, 4);
    EXPECT_GT(rate, 0);
    EXPECT_GT(peak, 0);
    if (i > 0) EXPECT_GE(peak, plan.measured[i - 1].peak_mib);  // a peak so far
    if (rate > best) best = rate, fastest = b;
  }
  EXPECT_EQ(plan.array_size, fastest);

  const auto again = planArraySize(digits(), 4, cache_);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.array_size, plan.array_size);
  EXPECT_EQ(again.measured, plan.measured);
  // Another cap is another question.
  EXPECT_FALSE(planArraySize(digits(), 1, cache_).cached);
}

TEST_F(ArrayPlanner, AnUnreadableCacheIsMeasuredAnew) {
  std::filesystem::create_directories(std::filesystem::path(cache_).parent_path());
  std::ofstream(cache_) << "not json";
  const auto plan = planArraySize(digits(), 1, cache_);
  EXPECT_FALSE(plan.cached);
  EXPECT_EQ(plan.array_size, 1);
  EXPECT_TRUE(planArraySize(digits(), 1, cache_).cached);
}

}  // namespace
}  // namespace hfta::tune
