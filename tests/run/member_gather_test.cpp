// An array that sheds members, or merges the members of two arrays, goes on
// as those members would have in the array they came from: the checkpoints'
// members gathered into a new array (run/gather.h, gatherCheckpoints)
// carry their parameters, optimizer and schedule state and metrics over.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "hfta/hfta.h"
#include "run/run.h"
#include "runtime/ops/segment_plan.h"
#include "support/atomic_file.h"
#include "tests/test_support.h"

namespace hfta::train {
namespace {

namespace fs = std::filesystem;

// Fresh members of the digits CNN on the synthetic 8x8 images, Adam with a
// learning rate per member halved every epoch: both optimizer moments,
// per-member step counts and a schedule to carry over.
RunConfig config(std::vector<uint64_t> seeds, std::vector<double> lrs) {
  RunConfig c;
  c.model = testing::modelPath("digits_0.pt");
  c.array_size = static_cast<int64_t>(seeds.size());
  c.seeds = std::move(seeds);
  c.dataset = "synthetic";
  c.limit = 320;
  c.optimizer = "adam";
  c.hyper.emplace("lr", PerMember(std::move(lrs)));
  c.scheduler = "step";
  c.schedule_settings.emplace("step_size", PerMember(1.0));
  c.schedule_settings.emplace("gamma", PerMember(0.5));
  c.options.epochs = 3;
  c.options.batch_size = 32;
  return c;
}

class MemberGather : public ::testing::Test {
 protected:
  // The arrays compared have different sizes, so their segment plans are
  // raced apart and may differ, which changes rounding; Adam turns the
  // rounding of the digits CNN's conv biases before batch norm (gradients
  // zero up to rounding) into lr-sized steps (issue 30's note), 1% of the
  // held-out loss in 3 epochs. What is tested here is the gathering, so
  // both arrays run the fused plan.
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hfta_gather_{}_{}", ::getpid(), test_++);
    fs::create_directories(dir_);
  }
  void TearDown() override { removeTree(dir_.string()); }
  testing::SegmentPlanScope fused_{segment_plan::Plan::Fused};
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The first epoch of `c`, saved as a checkpoint in `name`.
  std::string firstEpoch(const RunConfig& c, const std::string& name) {
    train::Run run(c);
    run.nextEpoch();
    run.saveCheckpoint(path(name));
    return path(name);
  }

  fs::path dir_;
  static inline int test_ = 0;
  // The arrays compared have different sizes, and the autotuner may time a
  // different convolution or linear form best for each (grouped at 4
  // members, per member at 2): the forms round differently, and Adam at lr 3e-2 grows
  // that past the fused tolerance within 3 epochs (seen on CI). One form
  // for all keeps a member's arithmetic the same in every array, so what is
  // compared is the state carried over.
  testing::FormScope forms_{ops::ConvForm::Grouped, ops::LinearForm::Batched};
};

std::vector<MemberEpoch> rowsOf(const std::vector<MemberEpoch>& rows, int64_t member) {
  std::vector<MemberEpoch> out;
  for (const auto& r : rows) {
    if (r.member == member) out.push_back(r);
  }
  return out;
}

// Every epoch's metrics of member `got` of `gathered` against member
// `expected` of the array it came from, trained on whole. The first epoch's
// rows are copied, so equal; later ones are computed by an array of another
// size, whose kernels may round differently (float32 fused tolerances).
void expectSameTrajectory(const train::Run& gathered, int64_t got, const train::Run& whole, int64_t expected) {
  const auto a = rowsOf(gathered.rows(), got), b = rowsOf(whole.rows(), expected);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  const double one_sample = 1.0 / static_cast<double>(whole.heldOutData().size());
  for (size_t e = 0; e < a.size(); ++e) {
    SCOPED_TRACE(fmt::format("member {} (was {}), epoch {}", got, expected, e + 1));
    EXPECT_EQ(a[e].epoch, b[e].epoch);
    EXPECT_EQ(a[e].lr, b[e].lr);  // the schedule's rate, from its carried-over state
    EXPECT_NEAR(a[e].train_loss, b[e].train_loss, testing::kTrainedTolerance * std::abs(b[e].train_loss));
    EXPECT_NEAR(a[e].heldout_loss, b[e].heldout_loss, testing::kTrainedTolerance * std::abs(b[e].heldout_loss));
    // A prediction on the edge between two classes may flip: one sample.
    EXPECT_NEAR(a[e].heldout_accuracy, b[e].heldout_accuracy, one_sample + 1e-12);
    if (e == 0) EXPECT_EQ(a[e].train_loss, b[e].train_loss);
  }
}

// Each member's weights after training, split out.
at::Tensor weights(const train::Run& run, int64_t member, const std::string& dir) {
  const auto path = run.exportMembers({member}, dir)[0];
  std::vector<at::Tensor> flat;
  for (const auto& p : loadMembers({path})[0].module.parameters()) flat.push_back(p.flatten());
  return at::cat(flat);
}

TEST_F(MemberGather, AShrunkArrayGoesOnAsItsMembersWouldHave) {
  const std::vector<double> lrs{1e-3, 3e-3, 1e-2, 3e-2};
  train::Run whole(config({0, 1, 2, 3}, lrs));
  while (!whole.finished()) whole.nextEpoch();

  const auto checkpoint = firstEpoch(config({0, 1, 2, 3}, lrs), "four");
  auto c = config({}, {lrs[3], lrs[1]});
  c.array_size = 0;
  c.members = {{checkpoint, 3}, {checkpoint, 1}};
  train::Run shrunk(c);
  EXPECT_EQ(shrunk.arraySize(), 2);
  EXPECT_EQ(shrunk.progress().epochs_done, 1);
  while (!shrunk.finished()) shrunk.nextEpoch();
  expectSameTrajectory(shrunk, 0, whole, 3);
  expectSameTrajectory(shrunk, 1, whole, 1);
  fs::create_directories(path("export"));
  const auto a = weights(shrunk, 0, path("export")), b = weights(whole, 3, path("export"));
  EXPECT_LE((a - b).abs().max().item<double>(), testing::kTrainedTolerance * b.abs().max().item<double>());
}

TEST_F(MemberGather, MembersOfTwoArraysMergeIntoOne) {
  const std::vector<double> lrs{1e-3, 3e-3, 1e-2, 3e-2};
  train::Run whole(config({0, 1, 2, 3}, lrs));
  while (!whole.finished()) whole.nextEpoch();

  const auto first = firstEpoch(config({0, 1}, {lrs[0], lrs[1]}), "first");
  const auto second = firstEpoch(config({2, 3}, {lrs[2], lrs[3]}), "second");
  auto c = config({}, {lrs[1], lrs[2]});
  c.array_size = 0;
  c.members = {{first, 1}, {second, 0}};
  train::Run merged(c);
  while (!merged.finished()) merged.nextEpoch();
  expectSameTrajectory(merged, 0, whole, 1);
  expectSameTrajectory(merged, 1, whole, 2);
}

TEST_F(MemberGather, RefusesMembersAtDifferentEpochs) {
  const auto one = firstEpoch(config({0, 1}, {1e-3}), "one");
  train::Run two_epochs(config({0, 1}, {1e-3}));
  two_epochs.nextEpoch();
  two_epochs.nextEpoch();
  two_epochs.saveCheckpoint(path("two"));
  auto c = config({}, {1e-3});
  c.array_size = 0;
  c.members = {{one, 0}, {path("two"), 1}};
  try {
    train::Run mixed(c);
    FAIL() << "members at epochs 1 and 2 were put in one array";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("different epochs done (1 and 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hfta::train
