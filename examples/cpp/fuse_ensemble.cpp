// A C++ program that fuses the ensemble inside a scripted module with
// hfta::fuseParallel, checks that it computes what it did, saves it, and
// times a training step before and after (the two timed in alternating
// rounds, medians).
//
//   python examples/ensemble.py out/ensembles
//   build/examples/cpp/fuse_ensemble out/ensembles/mlp_averaged_b8.pt --input-shape 16 --batch 32
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>

#include "examples/cpp/training_step.h"
#include "hfta/hfta.h"
#include "hfta/parallel.h"

int main(int argc, char** argv) {
  CLI::App app{"Fuse the ensemble inside a scripted module and time a training step", "fuse_ensemble"};
  std::string path, output;
  std::vector<int64_t> input_shape;
  int64_t batch = 32;
  int rounds = 15, steps = 10;
  bool own_inputs = false;
  app.add_option("module", path, "a scripted module with parallel members (examples/ensemble.py)")->required();
  app.add_option("--input-shape", input_shape, "one sample's shape")->delimiter(',')->required();
  app.add_option("--batch", batch);
  app.add_flag("--own-inputs", own_inputs, "forward takes [B, N, ...], member b reading slice b");
  app.add_option("--rounds", rounds);
  app.add_option("--steps", steps, "steps per round");
  app.add_option("-o", output, "save the fused module there");
  CLI11_PARSE(app, argc, argv);
  try {
    torch::jit::Module original = torch::jit::load(path);
    torch::jit::Module fused = torch::jit::load(path);
    const auto report = hfta::fuseParallel(fused);
    std::cout << report.text();
    if (report.fused.empty()) return 1;
    std::vector<int64_t> shape{batch};
    if (own_inputs) shape.insert(shape.begin(), static_cast<int64_t>(report.fused[0].members.size()));
    shape.insert(shape.end(), input_shape.begin(), input_shape.end());
    const auto x = torch::randn(shape);
    const auto before = original.forward({x}).toTensor();
    const auto after = fused.forward({x}).toTensor();
    fmt::print("outputs agree: {} (largest difference {:.2e})\n", at::allclose(before, after, 1e-5, 1e-6),
               (before - after).abs().max().item<double>());
    if (!output.empty()) hfta::saveModule(fused, output);
    std::vector<double> original_s, fused_s;
    for (int i = 0; i < 3; ++i) {  // the executor's profiling runs
      examples::trainingStep(original, x);
      examples::trainingStep(fused, x);
    }
    for (int r = 0; r < rounds; ++r) {
      double a = 0, b = 0;
      for (int s = 0; s < steps; ++s) a += examples::trainingStep(original, x);
      for (int s = 0; s < steps; ++s) b += examples::trainingStep(fused, x);
      original_s.push_back(a / steps);
      fused_s.push_back(b / steps);
    }
    const double a = examples::median(original_s), f = examples::median(fused_s);
    fmt::print("training step: {:.0f} us as written, {:.0f} us fused: {:.2f}x\n", a * 1e6, f * 1e6, a / f);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fuse_ensemble: error: {}\n", e.what());
    return 2;
  }
}
