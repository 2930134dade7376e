// The tuner's schedules against their definitions: Hyperband's brackets as
// Li et al. tabulate them, ASHA's promotions worked out by hand from
// Algorithm 2 for a given sequence of results.
#include <gtest/gtest.h>

#include <cmath>

#include "train/setting_error.h"
#include "tune/algorithm.h"

namespace hfta::tune {
namespace {

std::vector<std::vector<std::pair<int64_t, int64_t>>> table(const std::vector<Bracket>& brackets) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> rows;
  for (const auto& b : brackets) {
    rows.emplace_back();
    for (const auto& r : b.rungs) rows.back().emplace_back(r.trials, r.epochs);
  }
  return rows;
}

// Table 1 of Li et al. (JMLR 2018): R = 81, eta = 3, (n_i, r_i) per bracket.
TEST(HyperbandBrackets, MatchThePapersTableForR81Eta3) {
  const auto brackets = hyperbandBrackets(81, 3);
  ASSERT_EQ(brackets.size(), 5u);
  EXPECT_EQ(brackets[0].s, 4);
  EXPECT_EQ(table(brackets), (std::vector<std::vector<std::pair<int64_t, int64_t>>>{
                                 {{81, 1}, {27, 3}, {9, 9}, {3, 27}, {1, 81}},
                                 {{34, 3}, {11, 9}, {3, 27}, {1, 81}},
                                 {{15, 9}, {5, 27}, {1, 81}},
                                 {{8, 27}, {2, 81}},
                                 {{5, 81}},
                             }));
}

// R = 27, eta = 3 by the formulas: s_max = 3, n = ceil(4 * 3^s / (s + 1)).
TEST(HyperbandBrackets, FollowTheFormulasForR27Eta3) {
  EXPECT_EQ(table(hyperbandBrackets(27, 3)), (std::vector<std::vector<std::pair<int64_t, int64_t>>>{
                                                 {{27, 1}, {9, 3}, {3, 9}, {1, 27}},
                                                 {{12, 3}, {4, 9}, {1, 27}},
                                                 {{6, 9}, {2, 27}},
                                                 {{4, 27}},
                                             }));
}

// R = 10 is no power of 3: s_max = 2, epochs R / 9 = 1.1 -> 1 and R / 3 =
// 3.3 -> 3, then 10.
TEST(HyperbandBrackets, RoundEpochsWhereRIsNoPowerOfEta) {
  EXPECT_EQ(table(hyperbandBrackets(10, 3)), (std::vector<std::vector<std::pair<int64_t, int64_t>>>{
                                                 {{9, 1}, {3, 3}, {1, 10}},
                                                 {{5, 3}, {1, 10}},
                                                 {{3, 10}},
                                             }));
}

TEST(AshaRungs, GrowByEtaUpToR) {
  EXPECT_EQ(ashaRungEpochs(1, 27, 3), (std::vector<int64_t>{1, 3, 9, 27}));
  EXPECT_EQ(ashaRungEpochs(1, 10, 3), (std::vector<int64_t>{1, 3, 9, 10}));
  EXPECT_EQ(ashaRungEpochs(2, 2, 3), (std::vector<int64_t>{2}));
}

std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> described(const std::vector<Job>& jobs) {
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> out;
  for (const auto& j : jobs) out.emplace_back(j.trial, j.rung, j.from_epochs, j.to_epochs);
  return out;
}

// Metric = the trial's number: rungs keep the lowest numbers. The brackets
// run side by side: each round is the next rung of every bracket going.
TEST(Hyperband, RunsTheBracketsSideBySideRungByRungAndPromotesTheBest) {
  auto hyperband = makeAlgorithm({"hyperband", 9, 3});
  std::vector<std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>> rounds;
  for (auto jobs = hyperband->next(4); !jobs.empty(); jobs = hyperband->next(4)) {
    rounds.push_back(described(jobs));
    // Reported out of order: the ranking, not the order, decides.
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) hyperband->report(*it, static_cast<double>(it->trial));
  }
  using J = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  std::vector<J> first;  // s = 2: 9 trials of 1 epoch; s = 1: 5 of 3; s = 0: 3 of 9
  for (int64_t t = 0; t < 9; ++t) first.emplace_back(t, 0, 0, 1);
  for (int64_t t = 9; t < 14; ++t) first.emplace_back(t, 0, 0, 3);
  for (int64_t t = 14; t < 17; ++t) first.emplace_back(t, 0, 0, 9);
  EXPECT_EQ(rounds, (std::vector<std::vector<J>>{
                        first, {{0, 1, 1, 3}, {1, 1, 1, 3}, {2, 1, 1, 3}, {9, 1, 3, 9}}, {{0, 2, 3, 9}}}));
  EXPECT_EQ(hyperband->trials(), 17);
  // Rung 0 of bracket 2 ranked 9 trials and promoted 3.
  int64_t promoted = 0, stopped = 0;
  for (const auto& d : hyperband->decisions()) {
    if (d.bracket == 2 && d.rung == 0) (d.promoted ? promoted : stopped)++;
  }
  EXPECT_EQ(promoted, 3);
  EXPECT_EQ(stopped, 6);
}

TEST(Hyperband, DivergedTrialsRankLast) {
  auto hyperband = makeAlgorithm({"hyperband", 3, 3});
  auto jobs = hyperband->next(1);
  // s_max = 1: bracket 1 starts n = ceil(2 * 3 / 2) = 3 trials, bracket 0 2.
  ASSERT_EQ(jobs.size(), 5u);
  hyperband->report(jobs[0], std::nan(""));
  hyperband->report(jobs[1], 5.0);
  hyperband->report(jobs[2], 7.0);
  hyperband->report(jobs[3], 1.0);
  hyperband->report(jobs[4], 2.0);
  EXPECT_EQ(described(hyperband->next(1)), (decltype(described({})){{1, 1, 1, 3}}));
}

TEST(Hyperband, MoreTrialsRunWholeIterationsAgain) {
  auto hyperband = makeAlgorithm({"hyperband", 3, 3, /*trials=*/6});
  for (auto jobs = hyperband->next(1); !jobs.empty(); jobs = hyperband->next(1)) {
    for (const auto& j : jobs) hyperband->report(j, 1.0);
  }
  EXPECT_EQ(hyperband->trials(), 10);  // an iteration starts 3 + 2: two of them
}

// Worked by hand from Algorithm 2 with R = 9, eta = 3 (rungs of 1, 3 and 9
// epochs) and one worker reporting before it asks again.
TEST(Asha, PromotesTheTopThirdOfARungAsResultsArrive) {
  auto asha = makeAlgorithm({"asha", 9, 3, /*trials=*/7});
  const std::map<int64_t, std::vector<double>> metric{
      {0, {0.5}}, {1, {0.2, 0.1, 0.05}}, {2, {0.9}}, {3, {0.3}}, {4, {0.05, 0.4}}, {5, {0.6}}, {6, {0.15, 0.2}}};
  std::map<int64_t, size_t> reported;
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> order;
  for (auto jobs = asha->next(1); !jobs.empty(); jobs = asha->next(1)) {
    ASSERT_EQ(jobs.size(), 1u);
    order.push_back(described(jobs)[0]);
    asha->report(jobs[0], metric.at(jobs[0].trial).at(reported[jobs[0].trial]++));
  }
  EXPECT_EQ(order, (decltype(order){{0, 0, 0, 1},
                                    {1, 0, 0, 1},
                                    {2, 0, 0, 1},
                                    {1, 1, 1, 3},  // rung 0 has 3 results: its best, trial 1
                                    {3, 0, 0, 1},
                                    {4, 0, 0, 1},
                                    {4, 1, 1, 3},  // 5 results, top 1: trial 4 (0.05)
                                    {5, 0, 0, 1},
                                    {6, 0, 0, 1},
                                    {6, 1, 1, 3},     // 7 results, top 2: trials 4 and 6
                                    {1, 2, 3, 9}}));  // rung 1 has 3 results: trial 1 (0.1)
  // At the end, everyone not promoted stopped where it was.
  int64_t stopped = 0;
  for (const auto& d : asha->decisions()) stopped += d.promoted ? 0 : 1;
  EXPECT_EQ(stopped, 4 + 2);  // trials 0, 2, 3, 5 at rung 0; 4 and 6 at rung 1
}

TEST(Asha, ManyWorkersTakeNewTrialsUntilResultsArrive) {
  auto asha = makeAlgorithm({"asha", 9, 3, /*trials=*/5});
  EXPECT_EQ(described(asha->next(4)),
            (decltype(described({})){{0, 0, 0, 1}, {1, 0, 0, 1}, {2, 0, 0, 1}, {3, 0, 0, 1}}));
}

TEST(RandomSearch, TrainsEveryTrialToR) {
  auto random = makeAlgorithm({"random", 5, 3, /*trials=*/3});
  EXPECT_EQ(described(random->next(2)), (decltype(described({})){{0, 0, 0, 5}, {1, 0, 0, 5}}));
  EXPECT_EQ(described(random->next(2)), (decltype(described({})){{2, 0, 0, 5}}));
  EXPECT_TRUE(random->next(2).empty());
}

TEST(MakeAlgorithm, NamesTheOptionOutOfRange) {
  auto setting = [](const AlgorithmOptions& options) {
    try {
      makeAlgorithm(options);
    } catch (const train::SettingError& e) {
      return e.setting();
    }
    return std::string("none");
  };
  EXPECT_EQ(setting({"hyperband", 0, 3}), "max_epochs");
  EXPECT_EQ(setting({"hyperband", 27, 1}), "eta");
  EXPECT_EQ(setting({"asha", 27, 3}), "trials");
  EXPECT_EQ(setting({"asha", 27, 3, 5, 30}), "min_epochs");
  EXPECT_EQ(setting({"grid", 27, 3, 5}), "algorithm");
  EXPECT_EQ(setting({"random", 27, 3, 5}), "none");
}

}  // namespace
}  // namespace hfta::tune
