// One rank of a data-parallel group, started by dist_test.cpp or by
// torchrun: tensors whose values are the rank's, averaged in 1 KiB buckets
// (several per dtype); the means of ranks 1 and 2 (values r and r*r) are
// exact in binary floating point. Exit 0 when every value is right.
#include <fmt/format.h>
#include <torch/torch.h>

#include "dist/world.h"

int main() {
  const auto world = hfta::dist::worldFromEnvironment();
  if (!world || world->size != 2) {
    fmt::print(stderr, "dist_rank_check: run as one of 2 ranks (WORLD_SIZE=2)\n");
    return 2;
  }
  auto group = hfta::dist::Group::connect(*world, std::chrono::seconds(60));
  const double r = group.rank() + 1;  // 1, 2
  std::vector<at::Tensor> tensors{torch::full({3, 4}, r), torch::full({1000}, 10 * r, torch::kDouble),
                                  torch::full({700}, -r).t(), torch::full({2, 2}, r * r, torch::kDouble)};
  group.averageInPlace(tensors, /*bucket_bytes=*/1024);
  const std::vector<double> expected{1.5, 15.0, -1.5, 2.5};
  int wrong = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].eq(expected[i]).all().item<bool>()) {
      fmt::print(stderr, "rank {}: tensor {} is not all {}\n", group.rank(), i, expected[i]);
      ++wrong;
    }
  }
  group.barrier();
  return wrong == 0 ? 0 : 1;
}
