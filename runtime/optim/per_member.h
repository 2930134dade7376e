#pragma once
// A hyper-parameter that is either one value for every member or one value
// per member, and its [B, 1, ..., 1] tensor form that broadcasts against a
// stacked parameter.
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace hfta {

class PerMember {
 public:
  PerMember(double value) : values_{value} {}                            // NOLINT: a scalar is the common case
  PerMember(std::vector<double> values) : values_(std::move(values)) {}  // NOLINT

  // Throws std::invalid_argument naming `what` unless there are 1 or B values.
  void check(int64_t array_size, const std::string& what) const;
  double at(int64_t member) const { return values_.size() == 1 ? values_[0] : values_[member]; }
  bool uniform() const;
  // [B, 1, ..., 1] with `rank` dims, on `like`'s device and dtype.
  at::Tensor broadcastable(int64_t array_size, int64_t rank, const at::Tensor& like) const;
  std::vector<double> expanded(int64_t array_size) const;
  // The values as given (1 or B of them).
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> values_;
};

}  // namespace hfta
