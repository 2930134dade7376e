// The autotuner (runtime/ops/autotune.h): the faster candidate wins and is
// remembered, in memory and on disk; off, the heuristic decides; and
// hfta::conv's, hfta::linear's and the LSTM's measured forms compute what
// both forms compute.
#include "runtime/ops/autotune.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/ops/ops.h"
#include "support/atomic_file.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

class Autotune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hfta_autotune_{}", ::getpid());
    autotune::setCachePath((dir_ / "forms.json").string());
    autotune::setEnabled(true);
  }
  void TearDown() override {
    autotune::setEnabled(true);
    autotune::setCachePath("");
    removeTree(dir_.string());
  }
  // The cache file's text.
  std::string cacheText() const {
    std::ifstream in(dir_ / "forms.json");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // `actual`'s values (output, then gradients, named by `what`) equal
  // `expected`'s within kForwardTolerance of the largest of `scale`'s.
  static void expectSameValues(const std::vector<at::Tensor>& actual, const std::vector<at::Tensor>& expected,
                               const std::vector<at::Tensor>& scale, const std::vector<std::string>& what) {
    for (size_t i = 0; i < actual.size(); ++i) {
      SCOPED_TRACE(what[i]);
      EXPECT_LE((actual[i] - expected[i]).abs().max().item<double>(),
                testing::kForwardTolerance * scale[i].abs().max().item<double>());
    }
  }
  // The chosen form's values equal those of both forms.
  static void expectBothFormsValues(const std::vector<at::Tensor>& chosen, const std::vector<at::Tensor>& one,
                                    const std::vector<at::Tensor>& other, const std::vector<std::string>& what) {
    expectSameValues(chosen, one, one, what);
    expectSameValues(chosen, other, one, what);
  }
  // The slow candidate is hopeless after two timed runs (kHopeless = 3 times
  // the fastest run of the round) unless the fast one's sleep overruns by
  // 18 ms; under ctest -j 2 on a loaded 2-core machine, sleeps of a few
  // ms have overrun by 4 (ABurstAsLongAsOneCandidatesRunsDoesNotChoose).
  static constexpr double kFastMs = 2, kSlowMs = 60;
  // A candidate that takes `ms` milliseconds and counts its runs.
  static std::function<void()> sleeper(double ms, int* runs) {
    return [ms, runs] {
      ++*runs;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    };
  }
  fs::path dir_;
};

TEST_F(Autotune, ChoosesTheFasterCandidateOnceAndRemembersIt) {
  int slow = 0, fast = 0;
  // A 30x gap: no scheduler noise on a shared machine reverses it over the
  // median of three runs.
  EXPECT_EQ(autotune::choose("op|a", 0, {sleeper(kSlowMs, &slow), sleeper(kFastMs, &fast)}), 1u);
  EXPECT_EQ(fast, 5);  // one warm-up, one that sizes its samples (one run: 2 ms), three timed
  EXPECT_EQ(slow, 4);  // one warm-up, one sizing, two timed runs 30x the fastest of their rounds
  EXPECT_EQ(autotune::choose("op|a", 0, {sleeper(kSlowMs, &slow), sleeper(kFastMs, &fast)}), 1u);
  EXPECT_EQ(slow + fast, 9);  // not measured again
}

// The hot path: a signature seen before finds its choice without the key
// or the candidates being built; another signature, or the choices
// forgotten, build them again.
TEST_F(Autotune, AMemoBuildsTheKeyOncePerSignature) {
  autotune::Memo memo;
  int keys = 0, builds = 0, slow = 0, fast = 0;
  const auto key = [&](const char* name) {
    return [&keys, name] {
      ++keys;
      return std::string(name);
    };
  };
  const auto candidates = [&] {
    ++builds;
    return std::vector<std::function<void()>>{sleeper(kSlowMs, &slow), sleeper(kFastMs, &fast)};
  };
  const autotune::Memo::Signature a{1, 2, 3}, b{1, 2, 4};
  EXPECT_EQ(memo.choose(a, 0, key("memo|a"), candidates), 1u);
  for (int call = 0; call < 5; ++call) EXPECT_EQ(memo.choose(a, 0, key("memo|a"), candidates), 1u);
  EXPECT_EQ(keys, 1);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(memo.choose(b, 0, key("memo|b"), candidates), 1u);
  EXPECT_EQ(keys, 2);
  autotune::forget();  // the choices reread from the cache file: keyed, not measured again
  EXPECT_EQ(memo.choose(a, 0, key("memo|a"), candidates), 1u);
  EXPECT_EQ(keys, 3);
  EXPECT_EQ(fast + slow, 18);  // two measurements: five runs of the fast candidate, four of the slow
}

TEST_F(Autotune, AHopelessCandidateStopsAfterTwoTimedRuns) {
  int fast = 0, slow = 0;
  EXPECT_EQ(autotune::choose("op|f", 1, {sleeper(kFastMs, &fast), sleeper(kSlowMs, &slow)}), 0u);
  EXPECT_EQ(fast, 5);
  EXPECT_EQ(slow, 4);  // warm-up, sizing and two runs 30x the fastest of their rounds
}

// The faster candidate slowed 30-fold in its first timed run alone (the
// first fused op of a process has read so, unexplained): one slow sample
// does not make it hopeless, and its median keeps it the choice.
TEST_F(Autotune, OneSlowedSampleDoesNotDropTheFasterCandidate) {
  int fast = 0, steady = 0;
  const auto slowed_once = [&fast] {
    const bool slowed = fast == 2;  // after a warm-up and a sizing run
    ++fast;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(slowed ? kSlowMs : kFastMs));
  };
  EXPECT_EQ(autotune::choose("op|slowed", 1, {slowed_once, sleeper(5 * kFastMs, &steady)}), 0u);
  EXPECT_EQ(fast, 5);  // a warm-up, a sizing run and three timed runs, the first slowed
}

// A burst of another process's work that lasts as long as one candidate's
// timed runs: timed one candidate after the other, it would fall on the
// faster one alone (calls 3-5 below, after each candidate's warm-up and
// sizing run: its three timed runs, 330 ms each against the other's 50)
// and choose the slower; timed in turn, it slows both candidates' runs of
// one round, and the medians keep the faster.
// (30 ms against 50: neither is hopeless unless a sleep overruns by 40 ms;
// 3 against 5 failed on CI once, a 5 ms sleep overrunning by 4.)
TEST_F(Autotune, ABurstAsLongAsOneCandidatesRunsDoesNotChoose) {
  int calls = 0;
  const auto machine = [&calls](double ms) {
    return [ms, &calls] {
      const bool burst = calls >= 3 && calls <= 5;
      ++calls;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms + (burst ? 300 : 0)));
    };
  };
  EXPECT_EQ(autotune::choose("op|burst", 1, {machine(30), machine(50)}), 0u);
  EXPECT_EQ(calls, 10);  // a warm-up, a sizing run and three timed runs each
}

// A candidate that runs in a fraction of a millisecond (a small MLP's
// linear, forward and backward) is timed over samples of 2 ms, as many
// runs as take that long: one run of it times the clock and the machine's
// jitter. (A 0.1 ms sleep that overran to 1 ms on a loaded machine would
// still run twice a sample.)
TEST_F(Autotune, ACandidateFasterThanASampleRunsManyTimesASample) {
  int fast = 0, slow = 0;
  EXPECT_EQ(autotune::choose("op|short", 1, {sleeper(kSlowMs, &slow), sleeper(0.1, &fast)}), 1u);
  EXPECT_GT(fast, 5);  // more than a warm-up, a sizing run and three one-run samples
}

TEST_F(Autotune, ALaterProcessTakesTheChoiceFromTheCache) {
  int a = 0, b = 0;
  ASSERT_EQ(autotune::choose("op|b", 0, {sleeper(kSlowMs, &a), sleeper(kFastMs, &b)}), 1u);
  autotune::forget();  // as a new process starts: the file only
  int c = 0, d = 0;
  EXPECT_EQ(autotune::choose("op|b", 0, {sleeper(kFastMs, &c), sleeper(kSlowMs, &d)}), 1u);
  EXPECT_EQ(c + d, 0);
  EXPECT_NE(cacheText().find("\"op|b\""), std::string::npos) << cacheText();
}

TEST_F(Autotune, OffTheHeuristicDecidesAndNothingRuns) {
  autotune::setEnabled(false);
  int a = 0, b = 0;
  EXPECT_EQ(autotune::choose("op|c", 1, {sleeper(kFastMs, &a), sleeper(kSlowMs, &b)}), 1u);
  EXPECT_EQ(a + b, 0);
}

TEST_F(Autotune, ACandidateThatThrowsIsNotChosen) {
  int fine = 0;
  EXPECT_EQ(autotune::choose("op|d", 0, {[] { throw std::runtime_error("no"); }, sleeper(5, &fine)}), 1u);
}

TEST_F(Autotune, AnUnreadableCacheIsMeasuredAnew) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "forms.json") << "{ not json";
  autotune::forget();
  int a = 0, b = 0;
  EXPECT_EQ(autotune::choose("op|e", 0, {sleeper(kSlowMs, &a), sleeper(kFastMs, &b)}), 1u);
  EXPECT_EQ(b, 5);  // measured: a warm-up, a sizing run and three timed runs
}

// A wide layer (512 x 512 per member, where the forms differ most): the
// measured form's output and gradients equal both forms' within float32
// rounding of sums over 512 x 3 x 3 products (kForwardTolerance, relative).
TEST_F(Autotune, ConvInTheChosenFormComputesWhatBothFormsCompute) {
  torch::manual_seed(0);
  const int64_t members = 2, channels = 512;
  const auto input = torch::randn({2, members * channels, 6, 6});
  const auto weight = torch::randn({members, channels, channels, 3, 3}) * 0.02;
  const auto bias = torch::randn({members, channels});
  auto run = [&](ops::ConvForm form) {
    ops::setConvForm(form);
    const auto x = input.clone().requires_grad_(), w = weight.clone().requires_grad_();
    const auto y = ops::conv(x, w, bias, {1, 1}, {1, 1}, {1, 1}, 1);
    y.square().sum().backward();
    ops::setConvForm(ops::ConvForm::Chosen);
    return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad()};
  };
  const auto grouped = run(ops::ConvForm::Grouped), per_member = run(ops::ConvForm::PerMember);
  const auto chosen = run(ops::ConvForm::Chosen);
  expectBothFormsValues(chosen, grouped, per_member, {"output", "input gradient", "weight gradient"});
  EXPECT_NE(cacheText().find("hfta::conv|in [2,1024,6,6]|weight [2,512,512,3,3]"), std::string::npos) << cacheText();
}

// The members' own GEMMs against one batched GEMM, at a feed-forward
// layer's shape: output and gradients of the chosen form equal both
// forms' within float32 rounding of sums over 256 products.
TEST_F(Autotune, LinearInTheChosenFormComputesWhatBothFormsCompute) {
  torch::manual_seed(0);
  const auto input = torch::randn({3, 40, 256});
  const auto weight = torch::randn({3, 64, 256}) * 0.05;
  const auto bias = torch::randn({3, 64});
  auto run = [&](ops::LinearForm form) {
    ops::setLinearForm(form);
    const auto x = input.clone().requires_grad_(), w = weight.clone().requires_grad_();
    const auto b = bias.clone().requires_grad_();
    const auto y = ops::linear(x, w, b);
    y.square().sum().backward();
    ops::setLinearForm(ops::LinearForm::Chosen);
    return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto batched = run(ops::LinearForm::Batched), per_member = run(ops::LinearForm::PerMember);
  const auto chosen = run(ops::LinearForm::Chosen);
  ASSERT_EQ(chosen[0].sizes(), (std::vector<int64_t>{3, 40, 64}));
  expectBothFormsValues(chosen, batched, per_member, {"output", "input gradient", "weight gradient", "bias gradient"});
  EXPECT_NE(cacheText().find("hfta::linear|in [3,40,256]|weight [3,64,256]|bias true"), std::string::npos)
      << cacheText();
}

// A gradient penalty (the input gradient's square, differentiated again
// with create_graph, as WGAN-GP does) through both linear forms: the
// per-member form's backward writes into stacked gradients, except when
// its gradients are differentiated again; there it must give what the
// batched form gives, within float32 rounding of sums over 256 products.
TEST_F(Autotune, LinearGradientsInBothFormsCanBeDifferentiatedAgain) {
  torch::manual_seed(0);
  const auto input = torch::randn({3, 40, 256});
  const auto weight = torch::randn({3, 64, 256}) * 0.05;
  auto run = [&](ops::LinearForm form) {
    ops::setLinearForm(form);
    const auto x = input.clone().requires_grad_(), w = weight.clone().requires_grad_();
    const auto y = ops::linear(x, w, std::nullopt);
    const auto grad_x = torch::autograd::grad({y.tanh().sum()}, {x}, {}, true, true)[0];
    grad_x.square().sum().backward();
    ops::setLinearForm(ops::LinearForm::Chosen);
    return std::vector<at::Tensor>{grad_x.detach(), w.grad()};
  };
  const auto batched = run(ops::LinearForm::Batched), per_member = run(ops::LinearForm::PerMember);
  ASSERT_TRUE(per_member[1].defined());
  expectSameValues(per_member, batched, batched, {"input gradient", "weight gradient of the penalty"});
}

// A 2-layer LSTM of 3 members with dropout between its layers, in
// training: the chosen form's output and gradients equal both forms'
// within float32 rounding (gates bounded by sigmoid and tanh, sums over 24
// or 32 products per step), from the same seed. So the race, which runs
// before the chosen form on the first call, drew no random number: had it
// drawn, the masks would differ and the outputs by O(1).
TEST_F(Autotune, LstmInTheChosenFormDrawsWhatBothFormsDraw) {
  torch::manual_seed(0);
  const int64_t members = 3, steps = 12, batch = 4, features = 24, hidden = 32;
  const auto input = torch::randn({members, steps, batch, features});
  const auto h0 = torch::zeros({members, 2, batch, hidden}), c0 = torch::zeros({members, 2, batch, hidden});
  std::vector<at::Tensor> weights;
  for (const int64_t in : {features, hidden}) {
    for (const auto& sizes : {std::vector<int64_t>{members, 4 * hidden, in},
                              {members, 4 * hidden, hidden},
                              {members, 4 * hidden},
                              {members, 4 * hidden}}) {
      weights.push_back(torch::randn(sizes) * 0.2);
    }
  }
  auto run = [&](ops::RecurrentForm form) {
    ops::setRecurrentForm(form);
    torch::manual_seed(1);
    const auto x = input.clone().requires_grad_();
    std::vector<at::Tensor> params;
    for (const auto& w : weights) params.push_back(w.clone().requires_grad_());
    const auto y = std::get<0>(ops::lstm(x, {h0, c0}, params, true, 2, 0.5, true, false, false));
    y.square().sum().backward();
    ops::setRecurrentForm(ops::RecurrentForm::Chosen);
    return std::vector<at::Tensor>{y.detach(), x.grad(), params[0].grad(), params[5].grad()};
  };
  const auto stepped = run(ops::RecurrentForm::Stepped), per_member = run(ops::RecurrentForm::PerMember);
  const auto chosen = run(ops::RecurrentForm::Chosen);
  expectBothFormsValues(chosen, stepped, per_member,
                        {"output", "input gradient", "first w_ih gradient", "second w_hh gradient"});
  EXPECT_NE(cacheText().find("hfta::lstm|in [3,12,4,24]|h [3,2,4,32]|c [3,2,4,32]|w_ih [3,128,24]"), std::string::npos)
      << cacheText();
}

}  // namespace
}  // namespace hfta
