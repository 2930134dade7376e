#pragma once
// Shared by the GoogleTest suites: where the test setup put the members and
// PyTorch's reference answers, and how tensors are compared.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <optional>
#include <string>

#include "runtime/ops/ops.h"
#include "runtime/ops/segment_plan.h"

namespace hfta::testing {

// Tolerances of fused against alone (stated in README.md), relative as
// allClose applies them. The fused form sums in another order (one bmm or
// grouped convolution instead of B mm or convolutions), which moves the
// last bits of each sum: with unit roundoff u and sums of K <= ~1000 terms
// the difference is typically sqrt(K)*u, and training steps carry it on.
struct Tolerances {
  double forward, gradient, trained;  // trained: after the reference's optimizer steps
};
// float32 (u = 6e-8): 1e-5, 1e-5, 1e-4, which the measured differences
// (~1e-6, and ~1e-5 after 20 steps) stay well inside. float64 (u = 1.1e-16,
// 2^-29 times float32's): the same differences scale down to ~1e-14, so
// 1e-10 leaves four orders of margin and still catches any real error.
Tolerances tolerancesFor(at::ScalarType dtype);
constexpr Tolerances kFloat32{1e-5, 1e-5, 1e-4};
constexpr Tolerances kFloat64{1e-10, 1e-10, 1e-10};
// The tolerance for values after training steps that amplify a relative
// change of the weights `sensitivity`-fold (the test setup measures it in
// PyTorch, in float64: make_test_models.py, sensitivity()). Each step's
// sums may round differently by up to K*u relative (K <= 1000 terms: the
// worst case of a sum's rounding), and the steps amplify that at most
// `sensitivity`-fold: 1000 * u * sensitivity; never less than the dtype's
// `trained` tolerance. A tolerance above the cap throws: the steps are then
// chaotic enough that no comparison of trained values could fail. The caps
// sit 10x below what one SGD step of the tests' settings moves a weight
// (~1e-2 relative) in float32, and at 1e-6 in float64, where the families'
// steps amplify rounding at most 6e6-fold (PointNet-cls; 6.6e-7; the others
// below 1e-8).
constexpr double kMaxTrainedFloat32 = 1e-3;
constexpr double kMaxTrainedFloat64 = 1e-6;
double trainedTolerance(at::ScalarType dtype, double sensitivity);
constexpr double kForwardTolerance = kFloat32.forward;
constexpr double kGradientTolerance = kFloat32.gradient;
constexpr double kTrainedTolerance = kFloat32.trained;

// A test kind with the suffix "+per-member-conv" runs every convolution as
// B dense ones, one with "+channels-last-conv" as a grouped one in the
// channels-last layout, one with "+per-member-linear" every linear as B
// GEMMs, one with "+per-member-recurrent" every recurrent layer as the
// members' own ATen ops, one with "+stepped-recurrent" as all members at
// each time step (hfta::conv, hfta::linear and the recurrent ops may pick
// their forms by timing: the test models are small, and the tests must see
// every form): the scope strips the suffixes from `kind`, forces those
// forms, and puts the previous ones back when it ends. The second
// constructor forces the conv and linear forms given.
class FormScope {
 public:
  explicit FormScope(std::string& kind);
  FormScope(ops::ConvForm conv, ops::LinearForm linear);
  ~FormScope();
  FormScope(const FormScope&) = delete;
  FormScope& operator=(const FormScope&) = delete;

 private:
  ops::ConvForm previous_conv_;
  ops::LinearForm previous_linear_;
  ops::RecurrentForm previous_recurrent_;
};

// Forces every segment's plan (segment_plan::setForced; nullopt: none, so
// that the race decides) while the scope lives, and puts the previous
// setting back when it ends.
class SegmentPlanScope {
 public:
  explicit SegmentPlanScope(std::optional<segment_plan::Plan> plan);
  ~SegmentPlanScope();
  SegmentPlanScope(const SegmentPlanScope&) = delete;
  SegmentPlanScope& operator=(const SegmentPlanScope&) = delete;

 private:
  std::optional<segment_plan::Plan> previous_;
};

// Removes a folder that holds plain files only (what a test made under
// /tmp). Not std::filesystem::remove_all: libtorch carries copies of it
// that crash when called.
void removeFolderOfFiles(const std::string& dir);

// The folder written by tests/python/make_test_models.py.
std::string modelsDir();
std::string modelPath(const std::string& name);
// <kind>_<b>.pt for b < members; with exported, the torch.export archives
// of the same members (<kind>_<b>.pt2, make_exported_models.py).
std::vector<std::string> memberPaths(const std::string& kind, int members = 3, bool exported = false);
// Strips the suffix "+exported" from a test kind: whether it was there
// (the test reads the members' .pt2 archives).
bool takeExported(std::string& kind);
// Strips the suffix "+cuda": the device the test runs the fused module on
// (the reference stays PyTorch's on the CPU).
c10::Device takeDevice(std::string& kind);

// A dict of PyTorch's answers written by torch.save in the test setup.
class Reference {
 public:
  Reference() = default;
  explicit Reference(const std::string& name);
  at::Tensor tensor(const std::string& key) const;
  // A nested {name: tensor} dict, e.g. the gradients by parameter name.
  std::map<std::string, at::Tensor> tensors(const std::string& key) const;

 private:
  c10::IValue dict_;
};

// gtest assertion: the same shape, NaN in the same places, the same
// infinities in the same places, and |a - b| <= tol * (scale + |b|)
// everywhere else; compared on the CPU, whatever the tensors' devices.
// `scale` is the magnitude below which the comparison is absolute: 1 for
// values of order 1; smaller for quantities known to be small (gradients:
// the model's largest, gradientScale), so that they are held to the
// tolerance relative to their size rather than to 1.
::testing::AssertionResult allClose(const at::Tensor& actual, const at::Tensor& expected, double tolerance,
                                    double scale = 1.0);
// The scale of a model's gradients (their largest magnitude, at most 1): a
// gradient's rounding is relative to the terms it sums, which this bounds,
// even where they cancel to 0 (a convolution's bias before batch norm).
double gradientScale(const std::map<std::string, at::Tensor>& gradients);

}  // namespace hfta::testing
