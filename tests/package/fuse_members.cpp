// fuse_members MODEL.pt MODEL.pt ...: fuses the members with hfta, runs one
// fused SGD step on random data and prints the fused output's shape.
#include <hfta/hfta.h>
#include <hfta/runtime/optim/optimizers.h>

#include <iostream>

int main(int argc, char** argv) {
  std::vector<std::string> paths(argv + 1, argv + argc);
  auto fused = hfta::fuseFiles(paths);
  std::vector<at::Tensor> params;
  for (const auto& p : fused.module.parameters()) params.push_back(p);
  const auto members = static_cast<int64_t>(paths.size());
  hfta::optim::FusedSGD sgd(params, members, hfta::optim::SGDOptions{std::vector<double>(members, 0.01)});
  const auto input = torch::randn({members, 8, 16});
  const auto out = fused.module.forward({input}).toTensor();
  out.pow(2).sum().backward();
  sgd.step();
  std::cout << "fused " << members << " members: output " << out.sizes() << "\n";
  return 0;
}
