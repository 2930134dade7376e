// The LibTorch side of the throughput harness (bench/throughput.py): trains
// B members one way for a few timed steps and prints what it measured as
// one JSON object. The ways:
//   serial  the B member modules stepped one after another (torch::optim::SGD each)
//   hfta    the fused module (hfta-fuse's output, or fused here) with FusedSGD
//   dense   member 0 alone at batch B x N: the same arithmetic as the fused
//           array in the best-optimized single-model form
//   single  member 0 alone at batch N: one of the B processes of the
//           "concurrent" way (the driver starts them together)
// Several ways in one run are timed in alternating rounds, so machine noise
// hits them alike. A step: forward, each member's loss against a fixed random
// target (the members' losses summed), backward, SGD with momentum 0.9. The
// loss is hfta-train's: cross entropy against random token ids for the text
// models (--tokens), MSE against random values for the others.
// With --amp the forward runs under autocast (bfloat16, or float16 with loss
// scaling: hfta::optim::FusedGradScaler's scale per member for the fused
// array, torch.amp.GradScaler's rule per model for the others).
//
//   train_modes MEMBER.pt... --modes serial,hfta,dense [--fused F.pt] [--batch N]
//       [--input-shape 3,32,32] [--rounds R] [--steps S] [--min-seconds T] [--warmup W] [--settle] [--threads T]
//       [--device cpu|cuda] [--amp bfloat16|float16] [--tokens V] [--memory]
//       [--executor default|profiling|simple]
// --memory adds the peak of tensor memory the process held (bench/peak_memory.h):
// meaningful with one way per process.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include "bench/peak_memory.h"
#include "hfta/hfta.h"
#include "runtime/ops/autocast.h"
#include "runtime/optim/grad_scaler.h"
#include "runtime/optim/optimizers.h"
#include "support/allocator.h"

namespace {

constexpr double kLr = 0.01, kMomentum = 0.9;
// The most warm-up steps --settle takes past --warmup: the word LM's
// members (B = 8) took four past the harness's two.
constexpr int kMaxSettleSteps = 20;

std::vector<at::Tensor> parametersOf(const torch::jit::Module& m) {
  std::vector<at::Tensor> params;
  for (const auto& p : m.parameters()) params.push_back(p);
  return params;
}

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One way of training: a step function and the samples one step trains.
struct Way {
  std::function<void()> step;
  int64_t samples_per_step;
  // TorchScript's profiling executor (PyTorch's default: the serial and
  // single ways, scripted members as a user runs them), or the graph as it
  // is with eager autograd (what hfta-train runs: hfta, and the dense bound).
  bool profiling_executor;
};

// A model's output, or the first of its outputs (PointNet also returns its
// transforms).
at::Tensor mainOutput(const c10::IValue& out) {
  return out.isTuple() ? out.toTupleRef().elements()[0].toTensor() : out.toTensor();
}

// Each member's loss (a tensor of `members` values) of outputs `out` ([N,
// ...] for one member, [B, N, ...] for the fused array) against `target`,
// drawn once. The text models (token_scores: their outputs score each
// vocabulary entry at each position) train as hfta-train trains them, with
// cross entropy against random token ids; the others with MSE against
// random values. (MSE against a dense random target as large as the word
// LM's [N, 35, 33278] outputs is a loss nobody trains a language model with:
// with it the row read the fused array at 0.60x of eager, with cross entropy
// at 0.90-1.04x; bench/RESULTS.md.)
at::Tensor memberLosses(const at::Tensor& out, at::Tensor& target, int64_t members, bool token_scores) {
  const auto scores = out.to(at::kFloat);
  if (!token_scores) {
    if (!target.defined()) target = torch::randn(out.sizes(), scores.options());
    return (scores - target).pow(2).reshape({members, -1}).mean(1);
  }
  const int64_t vocabulary = out.size(-1);
  if (!target.defined()) {
    target = torch::randint(vocabulary, out.sizes().slice(0, out.dim() - 1), scores.options().dtype(at::kLong));
  }
  return at::cross_entropy_loss(scores.reshape({-1, vocabulary}), target.reshape(-1), {}, at::Reduction::None)
      .reshape({members, -1})
      .mean(1);
}

// torch.amp.GradScaler's step for one model and a LibTorch optimizer, with
// ATen's own kernels: what a single model's float16 training does.
class TorchAmpScaler {
 public:
  explicit TorchAmpScaler(bool enabled) : enabled_(enabled) {}
  at::Tensor scale(const at::Tensor& loss) {
    if (!enabled_) return loss;
    if (!scale_.defined()) {
      scale_ = at::full({1}, 65536.0, loss.options().dtype(at::kFloat));
      tracker_ = at::zeros({1}, loss.options().dtype(at::kInt));
    }
    return loss * scale_;
  }
  void step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params) {
    if (!enabled_) return (void)optimizer.step();
    auto found_inf = at::zeros({1}, scale_.options());
    std::vector<at::Tensor> grads;
    for (const auto& p : params) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, scale_.reciprocal());
    if (found_inf.item<float>() == 0) optimizer.step();
    at::_amp_update_scale_(scale_, tracker_, found_inf, 2.0, 0.5, 2000);
  }

 private:
  bool enabled_;
  at::Tensor scale_, tracker_;
};

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();  // (the driver gives the Python ways the same setting)
  CLI::App app{"Training throughput of B members trained one way, for bench/throughput.py", "train_modes"};
  std::vector<std::string> paths, modes;
  std::vector<int64_t> input_shape;
  int64_t tokens = 0;
  std::string fused_path, device_name = "cpu";
  int64_t batch = 32;
  int rounds = 3, steps = 5, warmup = 3, threads = 0;
  double min_seconds = 0;
  std::string amp;
  bool memory = false, settle = false;
  std::string executor = "default";
  app.add_option("members", paths, "the B member files")->required();
  app.add_option("--modes", modes, "serial, hfta, dense, single (comma-separated)")->delimiter(',')->required();
  app.add_option("--fused", fused_path, "hfta: the fused module from hfta-fuse (default: fuse the members here)");
  app.add_option("--batch", batch, "each member's batch size N");
  app.add_option("--input-shape", input_shape, "one sample's shape, e.g. 3,32,32")->delimiter(',')->required();
  app.add_option("--tokens", tokens, "inputs are token ids in [0, tokens) (the text models; input shape: length)");
  app.add_option("--rounds", rounds, "timed rounds per way, alternating between the ways");
  app.add_option("--steps", steps, "steps per round");
  app.add_option("--min-seconds", min_seconds,
                 "a round goes on, --steps at a time, until it has run this long (short steps time poorly)");
  app.add_option("--warmup", warmup, "untimed steps of each way first (the profiling executor's runs)");
  app.add_flag("--settle", settle,
               "after --warmup, warm up until a step maps almost no new memory (hfta::runUntilSettled), at most "
               "20 steps more; the JSON says how many warm-up steps each way took");
  app.add_option("--threads", threads, "intra-op threads (default: all cores)");
  app.add_option("--device", device_name, "cpu or cuda");
  app.add_option("--amp", amp, "autocast's dtype: bfloat16, or float16 (with loss scaling)")
      ->check(CLI::IsMember({"bfloat16", "float16"}));
  app.add_option("--executor", executor,
                 "default (serial and single under TorchScript's profiling executor, hfta and dense as hfta-train runs "
                 "them: the graph as it is, eager autograd), or profiling or simple for every way")
      ->check(CLI::IsMember({"default", "profiling", "simple"}));
  app.add_flag("--memory", memory, "report the peak of tensor memory held (one way per process)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (threads > 0) at::set_num_threads(threads);
    if (memory) hfta::bench::PeakMemory::watchCpu();
    const torch::Device device(device_name);
    const bool cuda = device.is_cuda();
    const bool token_scores = tokens > 0;  // (the outputs score the vocabulary: cross entropy)
    if (cuda && !torch::cuda::is_available()) throw hfta::UserError("--device cuda: no CUDA device here");
    if (cuda) at::globalContext().setBenchmarkCuDNN(true);  // every way, as hfta-train runs
    const auto array_size = static_cast<int64_t>(paths.size());
    // The member modules, loaded only by the ways that train them (not
    // counted against the others' memory).
    std::vector<hfta::Member> members;
    auto loadedMembers = [&]() -> std::vector<hfta::Member>& {
      if (members.empty()) members = hfta::loadMembers(paths);
      return members;
    };
    std::vector<int64_t> sample(input_shape);
    auto input = [&](std::vector<int64_t> leading) {
      leading.insert(leading.end(), sample.begin(), sample.end());
      // Token ids for the text models, else samples of a normal distribution.
      if (tokens > 0) return torch::randint(tokens, leading, torch::TensorOptions().device(device).dtype(at::kLong));
      return torch::randn(leading, torch::TensorOptions().device(device));
    };

    if (std::count(modes.begin(), modes.end(), "dense") && std::count(modes.begin(), modes.end(), "single")) {
      throw hfta::UserError("dense and single run in separate processes (they share one module)");
    }
    const bool half = amp == "float16";
    const auto amp_dtype = half ? at::kHalf : at::kBFloat16;
    // The forward under autocast (when asked); loss and backward outside it.
    auto forward = [&](torch::jit::Module& module, const at::Tensor& input) {
      const hfta::AutocastGuard autocast(device.type(), amp_dtype, !amp.empty());
      return mainOutput(module.forward({input}));
    };
    std::map<std::string, Way> ways;
    // Kept alive for the steps: modules, optimizers, data, targets.
    std::vector<torch::jit::Module> serial_modules;
    std::vector<std::unique_ptr<torch::optim::SGD>> serial_sgd;
    std::vector<TorchAmpScaler> serial_scalers(array_size, TorchAmpScaler(half));
    TorchAmpScaler dense_scaler(half);
    std::unique_ptr<hfta::optim::FusedGradScaler> fused_scaler;
    std::vector<at::Tensor> serial_targets(array_size);
    torch::jit::Module fused, dense;
    std::unique_ptr<hfta::optim::FusedSGD> fused_sgd;
    std::unique_ptr<torch::optim::SGD> dense_sgd;
    at::Tensor fused_target, dense_target;
    const bool array_input =
        std::count(modes.begin(), modes.end(), "serial") || std::count(modes.begin(), modes.end(), "hfta");
    const auto x = array_input ? input({array_size, batch}) : at::Tensor();
    const auto sgd = torch::optim::SGDOptions(kLr).momentum(kMomentum);
    for (const auto& mode : modes) {
      if (mode == "serial") {
        for (auto& m : loadedMembers()) {  // (hfta::fuse copies into stacked tensors: these stay separate)
          serial_modules.push_back(m.module);
          serial_modules.back().to(device);
          serial_sgd.push_back(std::make_unique<torch::optim::SGD>(parametersOf(serial_modules.back()), sgd));
        }
        ways[mode] = {
            [&] {
              for (int64_t b = 0; b < array_size; ++b) {
                serial_sgd[b]->zero_grad();
                serial_scalers[b]
                    .scale(memberLosses(forward(serial_modules[b], x[b]), serial_targets[b], 1, token_scores).sum())
                    .backward();
                serial_scalers[b].step(*serial_sgd[b], serial_sgd[b]->param_groups()[0].params());
              }
            },
            array_size * batch, /*profiling_executor=*/true};
      } else if (mode == "hfta") {
        hfta::FuseOptions fuse_options;
        fuse_options.allow_single_member = true;  // B = 1: the fused form of one member
        fused = fused_path.empty() ? hfta::fuse(loadedMembers(), fuse_options).module
                                   : hfta::loadMembers({fused_path})[0].module;
        // fuse() copied the members into stacked tensors: what another way
        // still trains it holds itself, and the rest is not the array's
        // memory (held, B = 1 would count a second copy of the parameters).
        members.clear();
        fused.to(device);
        hfta::optim::SGDOptions options;
        options.lr = kLr;
        options.momentum = kMomentum;
        fused_sgd = std::make_unique<hfta::optim::FusedSGD>(parametersOf(fused), array_size, options);
        if (half) fused_scaler = std::make_unique<hfta::optim::FusedGradScaler>(array_size);
        ways[mode] = {[&] {
                        fused_sgd->zero_grad();
                        // Each member's loss, summed: each member's gradient is its own.
                        const auto losses = memberLosses(forward(fused, x), fused_target, array_size, token_scores);
                        if (fused_scaler) {
                          fused_scaler->scale(losses).sum().backward();
                          fused_scaler->step(*fused_sgd);
                          fused_scaler->update();
                        } else {
                          losses.sum().backward();
                          fused_sgd->step();
                        }
                      },
                      array_size * batch, /*profiling_executor=*/false};
      } else if (mode == "dense" || mode == "single") {
        const int64_t n = mode == "dense" ? array_size * batch : batch;
        dense = hfta::loadMembers({paths[0]})[0].module;
        dense.to(device);
        dense_sgd = std::make_unique<torch::optim::SGD>(parametersOf(dense), sgd);
        const auto dense_x = input({n});
        ways[mode] = {
            [&, dense_x] {
              dense_sgd->zero_grad();
              dense_scaler.scale(memberLosses(forward(dense, dense_x), dense_target, 1, token_scores).sum()).backward();
              dense_scaler.step(*dense_sgd, dense_sgd->param_groups()[0].params());
            },
            n, /*profiling_executor=*/mode == "single"};
      } else {
        throw hfta::UserError(fmt::format("unknown mode {}: use serial, hfta, dense or single", mode));
      }
    }

    auto run = [&](const Way& way, int count) {
      const torch::jit::GraphOptimizerEnabledGuard executor_setting(executor == "default" ? way.profiling_executor
                                                                                          : executor == "profiling");
      for (int i = 0; i < count; ++i) way.step();
      if (cuda) torch::cuda::synchronize();
    };
    nlohmann::json result;
    for (const auto& [mode, way] : ways) {
      run(way, warmup);
      const int settling = settle ? hfta::runUntilSettled([&, &way = way] { run(way, 1); }, kMaxSettleSteps) : 0;
      result[mode]["warmup_steps"] = warmup + settling;
    }
    for (int r = 0; r < rounds; ++r) {
      for (const auto& mode : modes) {
        const double start = wallSeconds();
        int64_t done = 0;
        do {
          run(ways.at(mode), steps);
          done += steps;
        } while (wallSeconds() - start < min_seconds);
        const double end = wallSeconds();
        const int64_t samples = ways.at(mode).samples_per_step * done;
        auto& entry = result[mode];
        entry["samples_per_s"].push_back(static_cast<double>(samples) / (end - start));
        entry["start"].push_back(start);
        entry["end"].push_back(end);
        entry["samples"].push_back(samples);
      }
    }
    if (memory) result["memory"] = {{"peak_bytes", hfta::bench::PeakMemory::peakBytes(device)}};
    fmt::print("{}\n", result.dump());
    return 0;
  } catch (const hfta::UserError& e) {
    fmt::print(stderr, "train_modes: error: {}\n", e.what());
    return 2;
  }
}
