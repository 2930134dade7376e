// hfta::registerPasses inside TorchScript, against the ensembles it fuses,
// scripted from Python (examples/ensemble.py). This executable links the
// registration library hfta_register and calls nothing else of hfta: the
// modules run as any C++ program would run them, and their outputs, every
// member's gradients and batch-norm statistics are PyTorch's, computed in
// eager mode by the test setup.
#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/pass_manager.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <set>
#include <sstream>

#include "hfta/register.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

// The names of the autograd nodes that produced `out`.
std::set<std::string> autogradNodes(const at::Tensor& out) {
  std::set<std::string> names;
  std::vector<torch::autograd::Node*> stack{out.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!stack.empty()) {
    auto* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges()) stack.push_back(edge.function.get());
  }
  return names;
}

// Each member's gradients (or buffers), keyed "b.name" as the reference is.
std::map<std::string, at::Tensor> memberTensors(const torch::jit::Module& ensemble, bool buffers) {
  std::map<std::string, at::Tensor> out;
  int64_t b = 0;
  for (const auto& member : ensemble.attr("members").toModule().children()) {
    if (buffers) {
      for (const auto& t : member.named_buffers()) out[std::to_string(b) + "." + t.name] = t.value;
    } else {
      std::set<const c10::TensorImpl*> seen;  // a tied weight once, as Python names it
      for (const auto& p : member.named_parameters()) {
        if (seen.insert(p.value.unsafeGetTensorImpl()).second) out[std::to_string(b) + "." + p.name] = p.value.grad();
      }
    }
    ++b;
  }
  return out;
}

void expectSame(const std::map<std::string, at::Tensor>& actual, const std::map<std::string, at::Tensor>& expected,
                double tolerance) {
  EXPECT_EQ(actual.size(), expected.size());
  for (const auto& [key, value] : expected) {
    ASSERT_TRUE(actual.count(key)) << key;
    ASSERT_TRUE(actual.at(key).defined()) << key;
    EXPECT_TRUE(testing::allClose(actual.at(key).to(at::kDouble), value.to(at::kDouble), tolerance)) << key;
  }
}

TEST(Registration, LinkingTheLibraryRegistersThePassOnce) {
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 0u);
  const auto registered = torch::jit::getCustomPrePasses().size();
  EXPECT_GE(registered, 1u);
  registerPasses();
  EXPECT_EQ(torch::jit::getCustomPrePasses().size(), registered);
}

struct Case {
  std::string name;
  bool fused_when_run;  // false: the run-time check sends it down the members' own code
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class RegisteredPass : public ::testing::TestWithParam<Case> {};

TEST_P(RegisteredPass, RunsAsTheEnsembleDoes) {
  const std::string name = "ensemble_" + GetParam().name;
  auto module = torch::jit::load(testing::modelPath(name + ".pt"));
  const testing::Reference ref(name + "_reference.pt");
  const auto out = module.forward({ref.tensor("x")}).toTensor();

  std::stringstream optimized;
  optimized << *torch::jit::lastExecutedOptimizedGraph();
  EXPECT_NE(optimized.str().find("hfta::stackable"), std::string::npos) << optimized.str();
  // The fused outputs are unbound into the members' (the members' own code
  // does not unbind).
  EXPECT_EQ(autogradNodes(out).count("UnbindBackward0"), GetParam().fused_when_run ? 1u : 0u);

  EXPECT_TRUE(testing::allClose(out, ref.tensor("outputs"), testing::kForwardTolerance));
  out.pow(2).sum().backward();
  expectSame(memberTensors(module, false), ref.tensors("grads"), testing::kGradientTolerance);
  expectSame(memberTensors(module, true), ref.tensors("buffers"), testing::kForwardTolerance);
}

INSTANTIATE_TEST_SUITE_P(Ensembles, RegisteredPass,
                         ::testing::Values(Case{"mlp_averaged_b5", true}, Case{"lenet_stacked_b3", true},
                                           Case{"tied_averaged_b3", true}, Case{"mlp_averaged_b8", true},
                                           Case{"lenet_stacked_b8", true},
                                           // two outputs each, summed by the caller
                                           Case{"two_heads_summed_b3", true},
                                           // one tensor in two members
                                           Case{"shared_parameter", false},
                                           // one type, parameters of different sizes
                                           Case{"uneven", false}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hfta
