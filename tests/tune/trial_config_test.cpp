// Which trials share a fused array: decided by building the fused optimizer
// and schedule over their values and by fusing their models
// (tune/trial_config.h), not by a list of setting names.
#include "tune/trial_config.h"

#include <gtest/gtest.h>

#include "tests/test_support.h"
#include "train/setting_error.h"

namespace hfta::tune {
namespace {

train::RunConfig base() {
  train::RunConfig c;
  c.options.epochs = 5;
  return c;
}

train::RunConfig trial(const nlohmann::json& settings, int64_t id = 0,
                       const std::string& model = testing::modelPath("digits_0.pt")) {
  return trialConfig(base(), model, settings.get<Settings>(), id);
}

TEST(TrialConfig, PutsEachSettingWhereTheRunTakesIt) {
  const auto c = trial(
      {{"lr", 0.1}, {"momentum", 0.9}, {"seed", 7}, {"batch_size", 16}, {"gamma", 0.5}, {"scheduler", "step"}}, 3);
  EXPECT_EQ(c.hyper.at("lr").values(), std::vector<double>{0.1});
  EXPECT_EQ(c.hyper.at("momentum").values(), std::vector<double>{0.9});
  EXPECT_EQ(c.seeds, std::vector<uint64_t>{7});
  EXPECT_EQ(c.options.batch_size, 16);
  EXPECT_EQ(c.scheduler, "step");
  EXPECT_EQ(c.schedule_settings.at("gamma").values(), std::vector<double>{0.5});
  // Without a seed setting, the trial's number seeds its member.
  EXPECT_EQ(trial({{"lr", 0.1}}, 3).seeds, std::vector<uint64_t>{3});
}

TEST(TrialConfig, FillsTheModelsPathFromASetting) {
  const auto c = trialConfig(base(), "models/cnn_w{width}.pt", {{"width", 32}, {"lr", 0.1}}, 0);
  EXPECT_EQ(c.model, "models/cnn_w32.pt");
}

TEST(TrialConfig, ASettingNothingTakesIsAnErrorNamingIt) {
  try {
    trial({{"lr", 0.1}, {"betas", 0.9}});
    FAIL() << "betas was taken";
  } catch (const train::SettingError& e) {
    EXPECT_EQ(e.setting(), "betas");
    EXPECT_NE(e.problem().find("nothing takes it: sgd has no such setting"), std::string::npos) << e.problem();
  }
}

TEST(Partition, TrialsThatDifferInPerMemberSettingsShareAGroup) {
  Partition partition;
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}, {"momentum", 0.9}, {"seed", 1}}, 0)), 0);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.01}, {"momentum", 0.5}, {"seed", 2}}, 1)), 0);
  EXPECT_EQ(partition.groups(), 1);
}

TEST(Partition, TheOptimizerOrBatchSizeSplitsTrials) {
  Partition partition;
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}, {"optimizer", "sgd"}, {"batch_size", 32}})), 0);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}, {"optimizer", "adam"}, {"batch_size", 32}})), 1);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}, {"optimizer", "sgd"}, {"batch_size", 64}})), 2);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.2}, {"optimizer", "adam"}, {"batch_size", 32}})), 1);
}

// multistep's milestones hold for the whole run: trials with other ones
// cannot share a schedule, and the trial build of it says so.
TEST(Partition, ScheduleSettingsOfTheWholeRunSplitTrials) {
  Partition partition;
  auto with = [](double gamma, nlohmann::json milestones) {
    return trial({{"lr", 0.1}, {"scheduler", "multistep"}, {"gamma", gamma}, {"milestones", milestones}});
  };
  EXPECT_EQ(partition.groupOf(with(0.1, {2, 4})), 0);
  EXPECT_EQ(partition.groupOf(with(0.5, {2, 4})), 0);  // gamma is per member
  EXPECT_EQ(partition.groupOf(with(0.1, {3})), 1);
}

// Model files: those that fuse (the same architecture) share a group.
TEST(Partition, ModelsThatFuseShareAGroupOthersDoNot) {
  Partition partition;
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}}, 0, testing::modelPath("mlp_0.pt"))), 0);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}}, 1, testing::modelPath("mlp_1.pt"))), 0);
  EXPECT_EQ(partition.groupOf(trial({{"lr", 0.1}}, 2, testing::modelPath("mismatch/shape.pt"))), 1);
}

TEST(ArrayConfig, StacksTheMembersSettings) {
  const auto c = arrayConfig({trial({{"lr", 0.1}, {"seed", 4}}), trial({{"lr", 0.2}, {"seed", 5}})});
  EXPECT_EQ(c.array_size, 2);
  EXPECT_EQ(c.seeds, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(c.hyper.at("lr").values(), (std::vector<double>{0.1, 0.2}));
}

}  // namespace
}  // namespace hfta::tune
