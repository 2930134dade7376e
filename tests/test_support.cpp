#include "tests/test_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hfta::testing {

namespace {

bool takeSuffix(std::string& kind, const std::string& suffix) {
  const auto at = kind.find(suffix);
  if (at == std::string::npos) return false;
  kind.erase(at, suffix.size());
  return true;
}

}  // namespace

void removeFolderOfFiles(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) ::unlink(entry.path().c_str());
  ::rmdir(dir.c_str());
}

std::string modelsDir() {
  const char* dir = std::getenv("HFTA_TEST_MODELS");
  if (dir == nullptr) throw std::runtime_error("HFTA_TEST_MODELS is not set (run the tests with ctest)");
  return dir;
}

FormScope::FormScope(std::string& kind)
    : previous_conv_(ops::convForm()), previous_linear_(ops::linearForm()), previous_recurrent_(ops::recurrentForm()) {
  if (takeSuffix(kind, "+per-member-conv")) ops::setConvForm(ops::ConvForm::PerMember);
  if (takeSuffix(kind, "+channels-last-conv")) ops::setConvForm(ops::ConvForm::ChannelsLast);
  if (takeSuffix(kind, "+unfolded-conv")) ops::setConvForm(ops::ConvForm::Unfolded);
  if (takeSuffix(kind, "+per-member-linear")) ops::setLinearForm(ops::LinearForm::PerMember);
  if (takeSuffix(kind, "+per-member-recurrent")) ops::setRecurrentForm(ops::RecurrentForm::PerMember);
  if (takeSuffix(kind, "+stepped-recurrent")) ops::setRecurrentForm(ops::RecurrentForm::Stepped);
}

FormScope::FormScope(ops::ConvForm conv, ops::LinearForm linear)
    : previous_conv_(ops::convForm()), previous_linear_(ops::linearForm()), previous_recurrent_(ops::recurrentForm()) {
  ops::setConvForm(conv);
  ops::setLinearForm(linear);
}

FormScope::~FormScope() {
  ops::setConvForm(previous_conv_);
  ops::setLinearForm(previous_linear_);
  ops::setRecurrentForm(previous_recurrent_);
}

SegmentPlanScope::SegmentPlanScope(std::optional<segment_plan::Plan> plan) : previous_(segment_plan::forced()) {
  segment_plan::setForced(plan);
}

SegmentPlanScope::~SegmentPlanScope() { segment_plan::setForced(previous_); }

std::string modelPath(const std::string& name) { return modelsDir() + "/" + name; }

std::vector<std::string> memberPaths(const std::string& kind, int members, bool exported) {
  std::vector<std::string> paths;
  for (int b = 0; b < members; ++b) paths.push_back(modelPath(fmt::format("{}_{}.pt{}", kind, b, exported ? "2" : "")));
  return paths;
}

bool takeExported(std::string& kind) { return takeSuffix(kind, "+exported"); }

c10::Device takeDevice(std::string& kind) { return takeSuffix(kind, "+cuda") ? c10::kCUDA : c10::kCPU; }

Reference::Reference(const std::string& name) {
  std::ifstream in(modelPath(name), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dict_ = torch::jit::pickle_load(bytes);
}

at::Tensor Reference::tensor(const std::string& key) const { return dict_.toGenericDict().at(key).toTensor(); }

std::map<std::string, at::Tensor> Reference::tensors(const std::string& key) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : dict_.toGenericDict().at(key).toGenericDict()) {
    out[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return out;
}

Tolerances tolerancesFor(at::ScalarType dtype) {
  if (dtype == at::kDouble) return kFloat64;
  if (dtype == at::kFloat) return kFloat32;
  throw std::invalid_argument(fmt::format("no test tolerances for {}", c10::toString(dtype)));
}

double trainedTolerance(at::ScalarType dtype, double sensitivity) {
  constexpr double kTermsPerSum = 1000;
  const double unit_roundoff = dtype == at::kDouble ? 0x1p-53 : 0x1p-24;
  const double tolerance = std::max(tolerancesFor(dtype).trained, kTermsPerSum * unit_roundoff * sensitivity);
  const double cap = dtype == at::kDouble ? kMaxTrainedFloat64 : kMaxTrainedFloat32;
  if (tolerance > cap) {
    throw std::invalid_argument(fmt::format(
        "these training steps amplify rounding {:.3g}-fold: the trained values would be compared within {:.3g}, "
        "above the cap of {:g} for {} (a comparison that loose could not fail); choose gentler settings for this "
        "family in tests/python/make_test_models.py",
        sensitivity, tolerance, cap, c10::toString(dtype)));
  }
  return tolerance;
}

double gradientScale(const std::map<std::string, at::Tensor>& gradients) {
  double largest = 0;
  for (const auto& [name, g] : gradients) largest = std::max(largest, g.abs().max().item<double>());
  return std::min(1.0, largest);
}

::testing::AssertionResult allClose(const at::Tensor& actual, const at::Tensor& expected, double tolerance,
                                    double scale) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << fmt::format("shape [{}] != expected [{}]", fmt::join(actual.sizes(), ", "),
                                                        fmt::join(expected.sizes(), ", "));
  }
  const auto a = actual.detach().to(at::kCPU, at::kDouble).flatten();
  const auto e = expected.detach().to(at::kCPU, at::kDouble).flatten();
  auto firstWhere = [](const at::Tensor& mask) { return mask.nonzero()[0].item<int64_t>(); };
  const auto nan_differs = a.isnan().ne(e.isnan());
  if (nan_differs.any().item<bool>()) {
    const auto i = firstWhere(nan_differs);
    return ::testing::AssertionFailure() << fmt::format("element {} is {} but expected {} (NaN must match NaN)", i,
                                                        a[i].item<double>(), e[i].item<double>());
  }
  const auto inf_differs = (a.isinf() | e.isinf()) & a.ne(e);
  if (inf_differs.any().item<bool>()) {
    const auto i = firstWhere(inf_differs);
    return ::testing::AssertionFailure() << fmt::format(
               "element {} is {} but expected {} (infinities must match exactly)", i, a[i].item<double>(),
               e[i].item<double>());
  }
  const auto finite = a.isfinite();
  const auto excess = ((a - e).abs() - tolerance * (scale + e.abs())).masked_fill(finite.logical_not(), -1);
  if (excess.numel() > 0 && excess.max().item<double>() > 0) {
    const auto i = excess.argmax().item<int64_t>();
    return ::testing::AssertionFailure() << fmt::format(
               "max |actual - expected| = {} at element {} ({} vs {}) exceeds tolerance {} * ({} + |{}|)",
               (a - e).abs().masked_fill(finite.logical_not(), 0).max().item<double>(), i, a[i].item<double>(),
               e[i].item<double>(), tolerance, scale, e[i].item<double>());
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hfta::testing
