// Per-step training time of B fused members against the same B members
// stepped one after another, measured side by side: the two are timed in
// alternating rounds so that machine noise hits both alike, and the medians
// are compared.
//
//   mlp_step MEMBER.pt... [--batch N] [--input-shape 4,4] [--classes 10]
//            [--rounds R] [--steps S] [--warmup W] [--threads T]
// Each step: forward, the members' summed MSE losses, backward, SGD step
// (hfta::optim::FusedSGD for the fused module, torch::optim::SGD per member).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "hfta/hfta.h"
#include "runtime/optim/optimizers.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<at::Tensor> parametersOf(const torch::jit::Module& m) {
  std::vector<at::Tensor> params;
  for (const auto& p : m.parameters()) params.push_back(p);
  return params;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-step time: B fused members vs B separate ones, side by side", "mlp_step"};
  std::vector<int64_t> input_shape{4, 4};
  int64_t classes = 10;
  std::vector<std::string> paths;
  int64_t batch = 32;
  int rounds = 30, steps_per_round = 10, warmup = 20, threads = 1;
  app.add_option("members", paths)->required();
  app.add_option("--batch", batch);
  app.add_option("--input-shape", input_shape, "one sample's shape, e.g. 1,16,16")->delimiter(',');
  app.add_option("--classes", classes, "size of each member's output");
  app.add_option("--rounds", rounds);
  app.add_option("--steps", steps_per_round, "steps per round");
  app.add_option("--warmup", warmup, "untimed steps of each first (the profiling executor's runs)");
  app.add_option("--threads", threads, "intra-op threads (1: the per-operator overhead regime)");
  CLI11_PARSE(app, argc, argv);

  at::set_num_threads(threads);
  auto members = hfta::loadMembers(paths);
  const auto array_size = static_cast<int64_t>(members.size());
  auto fused = hfta::fuse(members).module;
  hfta::optim::FusedSGD fused_sgd(parametersOf(fused), array_size, {0.01});
  std::vector<torch::optim::SGD> separate_sgd;
  for (auto& m : members) separate_sgd.emplace_back(parametersOf(m.module), torch::optim::SGDOptions(0.01));

  std::vector<int64_t> x_shape{array_size, batch};
  x_shape.insert(x_shape.end(), input_shape.begin(), input_shape.end());
  const auto x = torch::randn(x_shape);
  const auto y = torch::randn({array_size, batch, classes});
  auto fused_step = [&] {
    fused_sgd.zero_grad();
    (fused.forward({x}).toTensor() - y).pow(2).mean(/*dim=*/{1, 2}).sum().backward();
    fused_sgd.step();
  };
  auto separate_step = [&] {
    for (int64_t b = 0; b < array_size; ++b) {
      separate_sgd[b].zero_grad();
      (members[b].module.forward({x[b]}).toTensor() - y[b]).pow(2).mean().backward();
      separate_sgd[b].step();
    }
  };
  auto time_steps = [&](const std::function<void()>& step) {
    const auto start = Clock::now();
    for (int i = 0; i < steps_per_round; ++i) step();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / steps_per_round;
  };
  for (int i = 0; i < warmup; ++i) {
    fused_step();
    separate_step();
  }
  std::vector<double> fused_us, separate_us;
  for (int r = 0; r < rounds; ++r) {
    fused_us.push_back(time_steps(fused_step));
    separate_us.push_back(time_steps(separate_step));
  }
  const double f = median(fused_us), s = median(separate_us);
  fmt::print(
      "B={} batch={} threads={}: fused {:.1f} us/step, separate {:.1f} us/step, "
      "speed-up {:.2f}x (medians of {} alternating rounds of {} steps)\n",
      array_size, batch, threads, f, s, s / f, rounds, steps_per_round);
  return 0;
}
