#include "runtime/optim/per_member.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace hfta {

void PerMember::check(int64_t array_size, const std::string& what) const {
  if (values_.size() != 1 && static_cast<int64_t>(values_.size()) != array_size) {
    throw std::invalid_argument(
        fmt::format("{} has {} values but the array has {} members: give one value for all "
                    "members or exactly one per member",
                    what, values_.size(), array_size));
  }
}

bool PerMember::uniform() const {
  return std::all_of(values_.begin(), values_.end(), [&](double v) { return v == values_[0]; });
}

std::vector<double> PerMember::expanded(int64_t array_size) const {
  std::vector<double> out(array_size);
  for (int64_t b = 0; b < array_size; ++b) out[b] = at(b);
  return out;
}

at::Tensor PerMember::broadcastable(int64_t array_size, int64_t rank, const at::Tensor& like) const {
  std::vector<int64_t> shape(std::max<int64_t>(rank, 1), 1);
  shape[0] = array_size;
  return at::tensor(expanded(array_size), at::TensorOptions().dtype(at::kDouble)).to(like.options()).view(shape);
}

}  // namespace hfta
