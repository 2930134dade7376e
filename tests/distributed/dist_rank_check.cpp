// One rank of a data-parallel group, started by dist_test.cpp or by
// torchrun: tensors whose values are the rank's (ranks 1 and 2 here, as
// values r and r*r), summed in 1 KiB buckets (several per dtype), then
// rank 0's broadcast; every result is exact in binary floating point. Exit 0
// when every value is right. With --leave, rank 1 exits once joined and
// rank 0 exits 0 only if its all-reduce then fails with a CollectiveError.
// With --gradients, gradients are summed while backward runs
// (OverlappedGradientSum): each parameter its own bucket, the buckets of
// the two that get gradients started before backward returns, the unused
// one's at finish().
#include <fmt/format.h>
#include <torch/torch.h>

#include "distributed/gradient_sum.h"
#include "distributed/world.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "--collectives";
  const auto world = hfta::distributed::worldFromEnvironment();
  if (!world || world->size != 2) {
    fmt::print(stderr, "dist_rank_check: run as one of 2 ranks (WORLD_SIZE=2)\n");
    return 2;
  }
  auto group = hfta::distributed::Group::connect(*world, at::kCPU, std::chrono::seconds(60));
  if (mode == "--leave") {
    if (group.rank() == 1) return 0;
    try {
      group.sumInPlace({torch::ones({4})});
    } catch (const hfta::distributed::CollectiveError& e) {
      fmt::print("rank 0: {}\n", e.what());
      return 0;
    }
    fmt::print(stderr, "rank 0: the all-reduce with a rank gone did not fail\n");
    return 1;
  }
  const double r = group.rank() + 1;  // 1, 2
  if (mode == "--gradients") {
    // In reverse order (the buckets' order): w2, w1, then the unused one.
    auto unused = torch::zeros({3}, torch::requires_grad());
    auto w1 = torch::ones({4}, torch::requires_grad()), w2 = torch::ones({4}, torch::requires_grad());
    hfta::distributed::OverlappedGradientSum sum(group, {unused, w1, w2}, /*bucket_bytes=*/16);
    sum.begin();
    ((w1 * r).sum() + (w2 * w2 * r).sum()).backward();  // gradients r and 2 r
    const size_t during = sum.started();
    sum.finish();
    const bool right = during == 2 && sum.started() == 3 && w1.grad().eq(3).all().item<bool>() &&
                       w2.grad().eq(6).all().item<bool>() && unused.grad().eq(0).all().item<bool>();
    if (!right) {
      fmt::print(stderr, "rank {}: {} buckets started during backward (2 expected); gradients {} {} {}\n", group.rank(),
                 during, w1.grad()[0].item<double>(), w2.grad()[0].item<double>(), unused.grad()[0].item<double>());
    }
    return right ? 0 : 1;
  }  // 1, 2
  std::vector<at::Tensor> tensors{torch::full({3, 4}, r), torch::full({1000}, 10 * r, torch::kDouble),
                                  torch::full({700}, -r).t(), torch::full({2, 2}, r * r, torch::kDouble)};
  int wrong = 0;
  auto check = [&](const char* what, const std::vector<double>& expected) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].eq(expected[i]).all().item<bool>()) {
        fmt::print(stderr, "rank {}: after the {}, tensor {} is not all {}\n", group.rank(), what, i, expected[i]);
        ++wrong;
      }
    }
  };
  group.sumInPlace(tensors, /*bucket_bytes=*/1024);
  check("sum", {3, 30, -3, 5});
  for (auto& t : tensors) t.fill_(r);
  group.broadcastInPlace(tensors, /*bucket_bytes=*/1024);
  check("broadcast", {1, 1, 1, 1});
  group.barrier();
  return wrong == 0 ? 0 : 1;
}
