#include "tune/search_space.h"

#include <gtest/gtest.h>

#include <cmath>

#include "train/setting_error.h"

namespace hfta::tune {
namespace {

SearchSpace space() {
  return SearchSpace::parse(nlohmann::json::parse(R"({
    "lr": {"loguniform": [1e-4, 1.0]}, "momentum": {"uniform": [0.5, 0.9]},
    "seed": {"int": [3, 5]}, "optimizer": {"choice": ["sgd", "adam"]}, "batch_size": 64})"),
                            "space.json");
}

TEST(SearchSpace, DrawsEachSettingFromItsDistribution) {
  const auto s = space();
  std::set<int64_t> seeds;
  std::set<std::string> optimizers;
  double log_lr_sum = 0;
  constexpr int kTrials = 2000;
  for (int64_t t = 0; t < kTrials; ++t) {
    const auto v = s.sample(t, 7);
    const double lr = v.at("lr").get<double>(), momentum = v.at("momentum").get<double>();
    ASSERT_GE(lr, 1e-4);
    ASSERT_LT(lr, 1.0);
    ASSERT_GE(momentum, 0.5);
    ASSERT_LT(momentum, 0.9);
    ASSERT_TRUE(v.at("seed").is_number_integer());
    seeds.insert(v.at("seed").get<int64_t>());
    optimizers.insert(v.at("optimizer").get<std::string>());
    ASSERT_EQ(v.at("batch_size"), 64);
    log_lr_sum += std::log10(lr);
  }
  // Both ends of an int range, every choice.
  EXPECT_EQ(seeds, (std::set<int64_t>{3, 4, 5}));
  EXPECT_EQ(optimizers, (std::set<std::string>{"sgd", "adam"}));
  // Log-uniform over 4 decades: log10(lr) has mean -2 and standard deviation
  // 4 / sqrt(12); the mean of 2000 draws is within 5 of its standard errors.
  const double standard_error = 4 / std::sqrt(12.0) / std::sqrt(static_cast<double>(kTrials));
  EXPECT_NEAR(log_lr_sum / kTrials, -2.0, 5 * standard_error);
}

TEST(SearchSpace, ATrialsSettingsDependOnlyOnTheSeedAndItsNumber) {
  const auto s = space();
  EXPECT_EQ(s.sample(5, 7), s.sample(5, 7));
  EXPECT_NE(s.sample(5, 7).at("lr"), s.sample(6, 7).at("lr"));
  EXPECT_NE(s.sample(5, 7).at("lr"), s.sample(5, 8).at("lr"));
}

TEST(SearchSpace, UnitIntervalCoversZeroToBelowOne) {
  EXPECT_EQ(unitInterval(0), 0.0);
  EXPECT_LT(unitInterval(~0ULL), 1.0);
  EXPECT_GT(unitInterval(~0ULL), 1.0 - 1e-15);
}

std::string badSetting(const char* text) {
  try {
    SearchSpace::parse(nlohmann::json::parse(text), "space.json");
  } catch (const train::SettingError& e) {
    return e.setting() + ": " + e.problem();
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SearchSpace, BadDistributionsNameTheSetting) {
  EXPECT_EQ(badSetting(R"({"lr": {"normal": [0, 1]}})"),
            "lr: unknown distribution \"normal\": use uniform, loguniform, int or choice");
  EXPECT_EQ(badSetting(R"({"lr": {"loguniform": [0, 1]}})"), "lr: loguniform needs low > 0, got 0");
  EXPECT_EQ(badSetting(R"({"lr": {"uniform": [1, 0]}})"), "lr: uniform: low 1 is above high 0");
  EXPECT_EQ(badSetting(R"({"seed": {"int": [0.5, 3]}})"), "seed: int takes whole bounds, got [0.5,3]");
  EXPECT_EQ(badSetting(R"({"wd": {"choice": []}})"), "wd: choice takes a non-empty list of values");
  EXPECT_EQ(badSetting(R"({"wd": [1, 2]})"), "wd: a fixed value is a number, a string or a bool, got [1,2]");
  EXPECT_EQ(badSetting(R"([])"),
            "space.json: a search space is a JSON object of settings, e.g. {\"lr\": {\"loguniform\": [1e-3, 1]}}");
}

}  // namespace
}  // namespace hfta::tune
