#include "tests/test_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace hfta::testing {

std::string modelsDir() {
  const char* dir = std::getenv("HFTA_TEST_MODELS");
  if (dir == nullptr) throw std::runtime_error("HFTA_TEST_MODELS is not set (run the tests with ctest)");
  return dir;
}

std::string modelPath(const std::string& name) { return modelsDir() + "/" + name; }

std::vector<std::string> memberPaths(const std::string& kind, int members) {
  std::vector<std::string> paths;
  for (int b = 0; b < members; ++b) paths.push_back(modelPath(fmt::format("{}_{}.pt", kind, b)));
  return paths;
}

Reference::Reference(const std::string& name) {
  std::ifstream in(modelPath(name), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dict_ = torch::jit::pickle_load(bytes);
}

at::Tensor Reference::tensor(const std::string& key) const {
  return dict_.toGenericDict().at(key).toTensor();
}

std::map<std::string, at::Tensor> Reference::tensors(const std::string& key) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : dict_.toGenericDict().at(key).toGenericDict()) {
    out[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return out;
}

::testing::AssertionResult allClose(const at::Tensor& actual, const at::Tensor& expected,
                                    double tolerance) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << fmt::format("shape [{}] != expected [{}]",
                                                        fmt::join(actual.sizes(), ", "),
                                                        fmt::join(expected.sizes(), ", "));
  }
  const auto a = actual.detach().to(at::kDouble);
  const auto e = expected.detach().to(at::kDouble);
  const auto excess = (a - e).abs() - tolerance * (1 + e.abs());
  const double worst = excess.numel() ? excess.max().item<double>() : -1;
  if (worst > 0 || a.isnan().any().item<bool>() != e.isnan().any().item<bool>()) {
    return ::testing::AssertionFailure()
           << fmt::format("max |actual - expected| = {} exceeds tolerance {}",
                          (a - e).abs().max().item<double>(), tolerance);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hfta::testing
