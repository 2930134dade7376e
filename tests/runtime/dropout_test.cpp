// hfta::dropout (runtime/ops/dropout_ops.cpp) against what ATen's dropout
// promises: each element kept with probability 1 - p and scaled by
// 1 / (1 - p), independently of the others; gradients through the same
// mask; reproducible from the seed. Its numbers are its own, so rates are
// checked against the binomial distribution, not against ATen's draws.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "runtime/ops/op_kinds.h"
#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

// A rate over n Bernoulli draws is off by more than 5 standard deviations
// with probability 5.7e-7: a wrong rate of a few percent fails, chance
// does not (and the seed is fixed).
constexpr double kSigmas = 5;
// Past 16 lanes and odd, so that the last element has no pair.
constexpr int64_t kElements = (1 << 20) + 17;

// Equal values, a zero's sign aside.
bool sameValues(const at::Tensor& a, const at::Tensor& b) { return torch::allclose(a, b, 0, 0); }

void expectRate(const at::Tensor& kept, double rate, const std::string& what) {
  const double n = static_cast<double>(kept.numel());
  EXPECT_NEAR(kept.to(at::kDouble).mean().item<double>(), rate, kSigmas * std::sqrt(rate * (1 - rate) / n)) << what;
}

TEST(HftaDropout, KeepsEachElementWithProbabilityOneMinusPAndScalesIt) {
  torch::manual_seed(0);
  for (double p : {0.1, 0.5, 0.9}) {
    const auto x = torch::rand({kElements}) + 0.5;  // no zeros: a zero output means dropped
    const auto y = ops::dropout(x, p, true);
    const auto kept = y != 0;
    expectRate(kept, 1 - p, "p = " + std::to_string(p));
    // ATen's scaling: the input times the float 1 / (1 - p), exactly.
    const auto scaled = x * static_cast<float>(1.0 / (1.0 - p));
    EXPECT_TRUE(torch::equal(y.masked_select(kept), scaled.masked_select(kept))) << "p = " << p;
    // Neighbours (two elements share one 64-bit output) independent: both
    // kept with probability (1 - p)^2, the last one (no neighbour) aside.
    const auto pairs = kept.narrow(0, 0, kElements - 1).view({-1, 2});
    expectRate(pairs.all(1), (1 - p) * (1 - p), "neighbours, p = " + std::to_string(p));
  }
}

TEST(HftaDropout, TakesEachFloatingTypeAndAnyLayout) {
  torch::manual_seed(1);
  for (auto type : {at::kDouble, at::kBFloat16, at::kHalf}) {
    const auto x = (torch::rand({64, 33}) + 0.5).to(type);
    const auto y = ops::dropout(x, 0.5, true);
    EXPECT_EQ(y.scalar_type(), type);
    const auto kept = y != 0;
    EXPECT_TRUE(torch::equal(y.masked_select(kept), (x * 2).masked_select(kept))) << type;
  }
  // A transposed input: the mask and the output follow its elements.
  const auto x = (torch::rand({40, 30}) + 0.5).t();
  const auto y = ops::dropout(x, 0.5, true);
  EXPECT_EQ(y.sizes(), x.sizes());
  const auto kept = y != 0;
  EXPECT_TRUE(torch::equal(y.masked_select(kept), (x * 2).masked_select(kept)));
}

TEST(HftaDropout, GradientsFlowThroughTheSameMaskAndCanBeDifferentiatedAgain) {
  torch::manual_seed(2);
  const auto x = (torch::rand({kElements}) + 0.5).requires_grad_(true);
  const auto w = torch::randn({kElements}, torch::requires_grad());
  const double p = 0.3;
  const auto y = ops::dropout(x, p, true);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const auto kept = (y != 0).detach();
  const auto expected = torch::where(kept, w.detach() * scale, torch::zeros_like(x));
  const auto gx = torch::autograd::grad({(y * w).sum()}, {x}, torch::autograd::variable_list{}, /*retain_graph=*/true,
                                        /*create_graph=*/true)[0];
  EXPECT_TRUE(sameValues(gx.detach(), expected));
  // gx = w * mask * scale, so d(sum gx)/dw = mask * scale.
  const auto gw = torch::autograd::grad({gx.sum()}, {w})[0];
  EXPECT_TRUE(sameValues(gw, torch::where(kept, torch::full_like(gw, scale), torch::zeros_like(gw))));
  // Without create_graph (the runtime's own backward kernel): the same.
  const auto y2 = ops::dropout(x, p, true);
  const auto g = torch::randn({kElements});
  const auto gx2 = torch::autograd::grad({y2}, {x}, {g})[0];
  EXPECT_TRUE(sameValues(gx2, torch::where(y2 != 0, g * scale, torch::zeros_like(g))));
}

TEST(HftaDropout, TheSeedReproducesItAndItTakesOneDrawOfTheGenerator) {
  const auto x = torch::ones({1000});
  torch::manual_seed(3);
  const auto first = ops::dropout(x, 0.5, true);
  const auto after = torch::rand({4});
  torch::manual_seed(3);
  EXPECT_TRUE(torch::equal(ops::dropout(x, 0.5, true), first));
  EXPECT_TRUE(torch::equal(torch::rand({4}), after));
  // One 64-bit draw: what follows is what follows one random64().
  torch::manual_seed(3);
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.get<at::CPUGeneratorImpl>()->random64();
  }
  EXPECT_TRUE(torch::equal(torch::rand({4}), after));
  // Another call draws another mask.
  EXPECT_FALSE(torch::equal(ops::dropout(x, 0.5, true), first));
}

TEST(HftaDropout, TheMaskDoesNotDependOnTheNumberOfThreads) {
  const auto x = torch::rand({kElements}) + 0.5;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(4);
  const auto one = ops::dropout(x, 0.5, true);
  at::set_num_threads(std::max(2, threads));
  torch::manual_seed(4);
  const auto many = ops::dropout(x, 0.5, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, many));
}

TEST(HftaDropout, OutsideTrainingAndTheOpenIntervalItIsAtensDropout) {
  const auto x = torch::rand({100}) + 0.5;
  EXPECT_TRUE(ops::dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(torch::equal(ops::dropout(x, 0.0, true), x));
  EXPECT_TRUE(torch::equal(ops::dropout(x, 1.0, true), torch::zeros_like(x)));
  EXPECT_THROW(ops::dropout(x, 1.5, true), c10::Error);
}

// Attention with dropout on the CPU drops out its softmax weights with
// hfta::dropout: the same seed, the weights computed here, and the
// runtime's dropout of them give the same output. float64, over 24 keys
// (past 16 lanes); tolerance: the same float64 attention in other kernels
// (ATen scales the queries and keys before their product, 1e-10 relative).
TEST(HftaDropout, AttentionDropsOutItsWeightsWithIt) {
  torch::manual_seed(5);
  constexpr int64_t kMembers = 3, kBatch = 2, kHeads = 2, kLength = 24, kEmbed = 16;
  const auto f64 = torch::dtype(torch::kFloat64);
  const auto q = torch::randn({kMembers, kBatch, kHeads, kLength, kEmbed}, f64).requires_grad_(true);
  const auto k = torch::randn({kMembers, kBatch, kHeads, kLength, kEmbed}, f64);
  const auto v = torch::randn({kMembers, kBatch, kHeads, kLength, kEmbed}, f64);
  const auto causal = torch::ones({kLength, kLength}, torch::kBool).tril();
  torch::manual_seed(6);
  const auto out = ops::scaled_dot_product_attention(q, k, v, causal.unsqueeze(0), 0.5, false, std::nullopt, false);

  const auto scores = q.detach().matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(kEmbed));
  const auto weights = scores.masked_fill(causal.logical_not(), -std::numeric_limits<double>::infinity()).softmax(-1);
  torch::manual_seed(6);
  const auto dropped = ops::dropout(weights.flatten(0, 1), 0.5, true).unflatten(0, {kMembers, kBatch});
  EXPECT_TRUE(torch::allclose(out.detach(), dropped.matmul(v), 1e-10, 1e-12));
  // Half the weights dropped: not ATen's dropout-free attention.
  EXPECT_FALSE(torch::allclose(out.detach(), weights.matmul(v), 1e-3, 1e-3));
  out.sum().backward();
  EXPECT_TRUE(q.grad().isfinite().all().item<bool>());
}

// Registered with conservative alias analysis: the JIT's common
// subexpression and dead code passes keep each call, so two dropouts of
// one input (R-Drop's two passes) draw two masks.
TEST(HftaDropout, TheJitKeepsEveryCall) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %p : float = prim::Constant[value=0.5]()
  %train : bool = prim::Constant[value=1]()
  %a : Tensor = hfta::dropout(%x, %p, %train)
  %b : Tensor = hfta::dropout(%x, %p, %train)
  %unused : Tensor = hfta::dropout(%x, %p, %train)
  %d : Tensor = aten::sub(%a, %b, %p)
  return (%d))IR",
                      graph.get());
  torch::jit::EliminateCommonSubexpression(graph);
  torch::jit::EliminateDeadCode(graph);
  int64_t calls = 0;
  for (const auto* node : graph->nodes()) calls += node->kind() == kind::dropout();
  EXPECT_EQ(calls, 3) << *graph;
}

}  // namespace
}  // namespace hfta::ops
