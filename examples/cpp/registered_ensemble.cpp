// A C++ program that runs a scripted ensemble fused by calling
// hfta::registerPasses() once and nothing else of hfta: the module is
// loaded and trained as any LibTorch program would. For comparison it
// first runs the same module as TorchScript runs it without hfta (before
// the call), and then with the setting registerPasses makes but without
// the pass, and times a training step of the three in alternating rounds
// (medians).
//
//   python examples/ensemble.py out/ensembles
//   build/examples/cpp/registered_ensemble out/ensembles/mlp_averaged_b8.pt --input-shape 16
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "examples/cpp/training_step.h"
#include "hfta/register.h"

namespace {

// How many times each hfta operator appears in the graph the executor ran last.
std::string hftaOps() {
  std::stringstream text;
  text << *torch::jit::lastExecutedOptimizedGraph();
  const std::string s = text.str();
  std::map<std::string, int> counts;
  const std::regex op(R"(hfta::\w+)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), op); it != std::sregex_iterator(); ++it) ++counts[it->str()];
  std::string out;
  for (const auto& [name, n] : counts) out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", name, n);
  return out.empty() ? "none" : out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run a scripted ensemble fused through hfta::registerPasses() and time a training step",
               "registered_ensemble"};
  std::string path;
  std::vector<int64_t> input_shape;
  int64_t batch = 32;
  int rounds = 15, steps = 10;
  bool own_inputs = false;
  app.add_option("module", path, "a scripted module whose `members` run side by side (examples/ensemble.py)")
      ->required();
  app.add_option("--input-shape", input_shape, "one sample's shape")->delimiter(',')->required();
  app.add_option("--batch", batch);
  app.add_flag("--own-inputs", own_inputs, "forward takes [B, N, ...], member b reading slice b");
  app.add_option("--rounds", rounds);
  app.add_option("--steps", steps, "steps per round");
  CLI11_PARSE(app, argc, argv);
  try {
    // As TorchScript runs it: the executor's plan is made on the first calls.
    torch::jit::Module as_is = torch::jit::load(path);
    std::vector<int64_t> shape{batch};
    if (own_inputs) shape.insert(shape.begin(), as_is.attr("members").toModule().children().size());
    shape.insert(shape.end(), input_shape.begin(), input_shape.end());
    const auto x = torch::randn(shape);
    const auto expected = as_is.forward({x}).toTensor();
    for (int i = 0; i < 10; ++i) examples::trainingStep(as_is, x);  // every plan made, before the setting changes

    // The executor setting registerPasses makes (no profiling run), unfused.
    torch::jit::getNumProfiledRuns() = 0;
    torch::jit::Module unprofiled = torch::jit::load(path);
    unprofiled.forward({x});
    for (int i = 0; i < 10; ++i) examples::trainingStep(unprofiled, x);

    // The one call; then the module runs fused.
    hfta::registerPasses();
    torch::jit::Module fused = torch::jit::load(path);
    const auto out = fused.forward({x}).toTensor();
    fmt::print("fused graph: {}\n", hftaOps());
    fmt::print("outputs agree: {} (largest difference {:.2e})\n", at::allclose(out, expected, 1e-5, 1e-6),
               (out - expected).abs().max().item<double>());
    for (int i = 0; i < 10; ++i) examples::trainingStep(fused, x);

    std::vector<double> as_is_s, unprofiled_s, fused_s;
    for (int r = 0; r < rounds; ++r) {
      double a = 0, u = 0, f = 0;
      for (int s = 0; s < steps; ++s) a += examples::trainingStep(as_is, x);
      for (int s = 0; s < steps; ++s) u += examples::trainingStep(unprofiled, x);
      for (int s = 0; s < steps; ++s) f += examples::trainingStep(fused, x);
      as_is_s.push_back(a / steps);
      unprofiled_s.push_back(u / steps);
      fused_s.push_back(f / steps);
    }
    const double a = examples::median(as_is_s), u = examples::median(unprofiled_s), f = examples::median(fused_s);
    fmt::print(
        "training step: {:.0f} us as TorchScript runs it, {:.0f} us without a profiling run, {:.0f} us fused: "
        "{:.2f}x and {:.2f}x\n",
        a * 1e6, u * 1e6, f * 1e6, a / f, u / f);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "registered_ensemble: error: {}\n", e.what());
    return 2;
  }
}
