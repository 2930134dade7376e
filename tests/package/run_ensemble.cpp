// run_ensemble ENSEMBLE.pt: runs a scripted ensemble twice with the
// registration library linked (and nothing of hfta called); HFTA_LOG shows
// the graph pass fusing it.
#include <torch/script.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto ensemble = torch::jit::load(argv[1]);
  const auto x = torch::randn({8, 16});
  at::Tensor out;
  for (int i = 0; i < 2; ++i) out = ensemble.forward({x}).toTensor();
  std::cout << "ensemble output " << out.sizes() << "\n";
  return 0;
}
