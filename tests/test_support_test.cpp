// The comparator every equivalence test rests on must fail where it should:
// a NaN or an infinity in the wrong place, a value just past the tolerance,
// another shape.
#include "tests/test_support.h"

#include <gtest/gtest.h>

#include <limits>

namespace hfta::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

at::Tensor values(std::vector<double> v) { return at::tensor(v, at::kDouble); }

TEST(AllClose, PassesWithinTheToleranceRelativeToOnePlusTheExpectedValue) {
  EXPECT_TRUE(allClose(values({1.0, 100.0}), values({1.0 + 1.9e-5, 100.0 + 1e-3}), 1e-5));
  EXPECT_FALSE(allClose(values({1.0, 100.0}), values({1.0 + 2.1e-5, 100.0}), 1e-5));
  EXPECT_FALSE(allClose(values({1.0, 100.0}), values({1.0, 100.0 + 1.02e-3}), 1e-5));
}

// Below `scale` the comparison is absolute; gradients pass the model's
// gradient scale, so that 1e-6 on a gradient of 2e-4 (0.5%) fails where
// 1e-5 * (1 + |b|) would let it through.
TEST(AllClose, SmallQuantitiesAreComparedRelativeToTheirScale) {
  EXPECT_TRUE(allClose(values({2e-4 + 1e-6}), values({2e-4}), 1e-5));
  EXPECT_FALSE(allClose(values({2e-4 + 1e-6}), values({2e-4}), 1e-5, /*scale=*/1e-3));
  EXPECT_TRUE(allClose(values({2e-4 + 1.1e-8}), values({2e-4}), 1e-5, /*scale=*/1e-3));  // 1e-5 * 1.2e-3
}

TEST(GradientScale, IsTheLargestGradientUpToOne) {
  EXPECT_DOUBLE_EQ(gradientScale({{"a", values({1e-3, -4e-3})}, {"b", values({2e-3})}}), 4e-3);
  EXPECT_DOUBLE_EQ(gradientScale({{"a", values({30.0})}}), 1.0);
}

TEST(AllClose, NaNMustMatchNaNInTheSamePlaces) {
  EXPECT_TRUE(allClose(values({kNaN, 1.0}), values({kNaN, 1.0}), 1e-5));
  EXPECT_FALSE(allClose(values({kNaN, 1.0}), values({1.0, kNaN}), 1e-5));  // NaN in both, elsewhere
  EXPECT_FALSE(allClose(values({kNaN, 1.0}), values({0.0, 1.0}), 1e-5));
  EXPECT_FALSE(allClose(values({0.0, 1.0}), values({kNaN, 1.0}), 1e-5));
  // A NaN elsewhere does not excuse a finite value out of tolerance.
  EXPECT_FALSE(allClose(values({kNaN, 1.0}), values({kNaN, 2.0}), 1e-5));
}

TEST(AllClose, InfinitiesMustMatchExactly) {
  EXPECT_TRUE(allClose(values({kInf, -kInf, 3.0}), values({kInf, -kInf, 3.0}), 1e-5));
  EXPECT_FALSE(allClose(values({1e30}), values({kInf}), 1e-5));  // finite against inf
  EXPECT_FALSE(allClose(values({kInf}), values({1e30}), 1e-5));
  EXPECT_FALSE(allClose(values({kInf}), values({-kInf}), 1e-5));
  EXPECT_FALSE(allClose(values({kInf}), values({kNaN}), 1e-5));
}

TEST(AllClose, ShapesMustMatch) {
  EXPECT_FALSE(allClose(values({1.0, 2.0}), values({1.0, 2.0}).view({2, 1}), 1e-5));
  EXPECT_FALSE(allClose(values({1.0}), values({1.0, 1.0}), 1e-5));
}

TEST(AllClose, ComparesFloat32AgainstFloat64InDouble) {
  EXPECT_TRUE(allClose(values({0.1}).to(at::kFloat), values({0.1}), 1e-7));
  EXPECT_FALSE(allClose(values({0.1}).to(at::kFloat), values({0.1}), 1e-10));
}

TEST(Tolerances, Float64IsTighterThanFloat32) {
  EXPECT_LE(tolerancesFor(at::kDouble).trained, 1e-10);
  EXPECT_EQ(tolerancesFor(at::kFloat).forward, kForwardTolerance);
  EXPECT_THROW(tolerancesFor(at::kHalf), std::invalid_argument);
}

TEST(TrainedTolerance, GrowsWithTheSensitivityUpToACap) {
  EXPECT_EQ(trainedTolerance(at::kDouble, 1.0), kFloat64.trained);
  EXPECT_DOUBLE_EQ(trainedTolerance(at::kDouble, 1e6), 1000 * 0x1p-53 * 1e6);
  EXPECT_THROW(trainedTolerance(at::kDouble, 1e8), std::invalid_argument);  // 1.1e-5 > 1e-6
  EXPECT_EQ(trainedTolerance(at::kFloat, 1.0), kFloat32.trained);
  EXPECT_THROW(trainedTolerance(at::kFloat, 1e2), std::invalid_argument);  // 6e-3 > 1e-3
}

}  // namespace
}  // namespace hfta::testing
