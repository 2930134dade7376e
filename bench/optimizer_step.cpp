// One optimizer step over B = 8 members of ResNet-18's size (CIFAR-10
// variant, 11.2M parameters each; argument 0) or of the harness's MLP
// (16 -> 32 -> 32 -> 10, 6 tensors; argument 1, where the time is per-call
// overhead): hfta's fused optimizer on the stacked parameters against what
// a LibTorch user has otherwise, on the same gradients:
//   Hfta        FusedAdam / FusedSGD over the 62 stacked [8, ...] tensors
//   TorchOptim  8 torch::optim::Adam / SGD, one per member (LibTorch's
//               optimizers have no multi-tensor mode)
//   AtenFused   8 calls of ATen's own fused multi-tensor kernels
//               (at::_fused_adam_ / at::_fused_sgd_), one per member since
//               each member has its own learning rate
//   DenseSgd    one torch::optim::SGD over one member: the dense bound's step
//
//   optimizer_step --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//                  [--benchmark_filter=Adam] [--device=cuda]
// Random interleaving runs the repetitions of every variant in a shuffled
// order, so machine noise hits them alike; compare the medians.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstring>

#include "runtime/optim/optimizers.h"

namespace {

constexpr int64_t kMembers = 8;
torch::Device device = torch::kCPU;

enum Model : int64_t { kResNet18, kMlp };

std::vector<std::vector<int64_t>> resnet18Shapes() {
  std::vector<std::vector<int64_t>> shapes{{64, 3, 3, 3}, {64}, {64}};
  int64_t in = 64;
  for (int64_t planes : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const bool downsample = block == 0 && planes != 64;
      shapes.insert(shapes.end(), {{planes, in, 3, 3}, {planes}, {planes}, {planes, planes, 3, 3}, {planes}, {planes}});
      if (downsample) shapes.insert(shapes.end(), {{planes, in, 1, 1}, {planes}, {planes}});
      in = planes;
    }
  }
  shapes.insert(shapes.end(), {{10, 512}, {10}});
  return shapes;
}

std::vector<std::vector<int64_t>> shapesOf(const benchmark::State& state) {
  if (state.range(0) == kMlp) return {{32, 16}, {32}, {32, 32}, {32}, {10, 32}, {10}};
  return resnet18Shapes();
}

std::vector<double> learningRates(double base) {
  std::vector<double> lr;
  for (int64_t b = 0; b < kMembers; ++b) lr.push_back(base * (1 + b));
  return lr;
}

// Stacked [8, ...] parameters with gradients, and each member's views.
struct Parameters {
  std::vector<at::Tensor> stacked;
  std::vector<std::vector<at::Tensor>> members;  // separate tensors, as B separate models hold them
  explicit Parameters(const benchmark::State& state) {
    torch::manual_seed(0);
    for (const auto& shape : shapesOf(state)) {
      std::vector<int64_t> stacked_shape{kMembers};
      stacked_shape.insert(stacked_shape.end(), shape.begin(), shape.end());
      auto p = torch::randn(stacked_shape, device).requires_grad_(true);
      p.mutable_grad() = torch::randn(stacked_shape, device) * 1e-3;
      stacked.push_back(p);
    }
    members.resize(kMembers);
    for (int64_t b = 0; b < kMembers; ++b) {
      for (const auto& p : stacked) {
        auto m = p[b].detach().clone().requires_grad_(true);
        m.mutable_grad() = p.grad()[b].clone();
        members[b].push_back(m);
      }
    }
  }
};

void synchronize() {
  if (device.is_cuda()) torch::cuda::synchronize();
}

void HftaAdam(benchmark::State& state) {
  Parameters params(state);
  hfta::optim::FusedAdam adam(params.stacked, kMembers, hfta::optim::AdamOptions{learningRates(1e-4)});
  for (auto _ : state) {
    adam.step();
    synchronize();
  }
}

void TorchOptimAdam(benchmark::State& state) {
  Parameters params(state);
  std::vector<std::unique_ptr<torch::optim::Adam>> optims;
  const auto lr = learningRates(1e-4);
  for (int64_t b = 0; b < kMembers; ++b) {
    optims.push_back(std::make_unique<torch::optim::Adam>(params.members[b], torch::optim::AdamOptions(lr[b])));
  }
  for (auto _ : state) {
    for (auto& o : optims) o->step();
    synchronize();
  }
}

void AtenFusedAdam(benchmark::State& state) {
  Parameters params(state);
  const auto lr = learningRates(1e-4);
  std::vector<std::vector<at::Tensor>> grads(kMembers), exp_avg(kMembers), exp_avg_sq(kMembers), steps(kMembers);
  for (int64_t b = 0; b < kMembers; ++b) {
    for (const auto& p : params.members[b]) {
      grads[b].push_back(p.grad());
      exp_avg[b].push_back(torch::zeros_like(p));
      exp_avg_sq[b].push_back(torch::zeros_like(p));
      steps[b].push_back(torch::zeros({}, torch::TensorOptions(torch::kFloat).device(device)));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    for (int64_t b = 0; b < kMembers; ++b) {
      for (auto& s : steps[b]) s.add_(1);
      at::_fused_adam_(params.members[b], grads[b], exp_avg[b], exp_avg_sq[b], {}, steps[b], lr[b], 0.9, 0.999, 0.0,
                       1e-8, false, false);
    }
    synchronize();
  }
}

void HftaSgd(benchmark::State& state) {
  Parameters params(state);
  hfta::optim::FusedSGD sgd(params.stacked, kMembers, hfta::optim::SGDOptions{learningRates(1e-3), 0.9});
  for (auto _ : state) {
    sgd.step();
    synchronize();
  }
}

void TorchOptimSgd(benchmark::State& state) {
  Parameters params(state);
  std::vector<std::unique_ptr<torch::optim::SGD>> optims;
  const auto lr = learningRates(1e-3);
  for (int64_t b = 0; b < kMembers; ++b) {
    optims.push_back(
        std::make_unique<torch::optim::SGD>(params.members[b], torch::optim::SGDOptions(lr[b]).momentum(0.9)));
  }
  for (auto _ : state) {
    for (auto& o : optims) o->step();
    synchronize();
  }
}

void AtenFusedSgd(benchmark::State& state) {
  Parameters params(state);
  const auto lr = learningRates(1e-3);
  std::vector<std::vector<at::Tensor>> grads(kMembers), buffers(kMembers);
  for (int64_t b = 0; b < kMembers; ++b) {
    for (const auto& p : params.members[b]) {
      grads[b].push_back(p.grad());
      buffers[b].push_back(torch::zeros_like(p));
    }
  }
  torch::NoGradGuard no_grad;
  bool first = true;
  for (auto _ : state) {
    for (int64_t b = 0; b < kMembers; ++b) {
      at::_fused_sgd_(params.members[b], grads[b], buffers[b], 0.0, 0.9, lr[b], 0.0, false, false, first);
    }
    first = false;
    synchronize();
  }
}

void DenseSgd(benchmark::State& state) {
  Parameters params(state);
  torch::optim::SGD sgd(params.members[0], torch::optim::SGDOptions(1e-3).momentum(0.9));
  for (auto _ : state) {
    sgd.step();
    synchronize();
  }
}

}  // namespace

#define MODELS ArgName("model")->Arg(kResNet18)->Arg(kMlp)->Unit(benchmark::kMicrosecond)->UseRealTime()
BENCHMARK(HftaAdam)->MODELS;
BENCHMARK(TorchOptimAdam)->MODELS;
BENCHMARK(AtenFusedAdam)->MODELS;
BENCHMARK(HftaSgd)->MODELS;
BENCHMARK(TorchOptimSgd)->MODELS;
BENCHMARK(AtenFusedSgd)->MODELS;
BENCHMARK(DenseSgd)->MODELS;

int main(int argc, char** argv) {
  // --device=cuda runs the same comparison on the GPU.
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device=cuda") == 0) {
      device = torch::kCUDA;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
