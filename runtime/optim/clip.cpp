#include "runtime/optim/clip.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace hfta::optim {
namespace {

std::vector<at::Tensor> gradsOf(const std::vector<at::Tensor>& params, int64_t array_size) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    if (p.dim() < 1 || p.size(0) != array_size) {
      throw std::invalid_argument(fmt::format("clipping: a parameter is not {} members stacked on dim 0", array_size));
    }
    grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace

at::Tensor clip_grad_norm_per_member(const std::vector<at::Tensor>& params, int64_t array_size,
                                     const PerMember& max_norm, double norm_type) {
  max_norm.check(array_size, "max_norm");
  at::NoGradGuard no_grad;
  const auto grads = gradsOf(params, array_size);
  if (grads.empty()) return at::zeros({array_size});
  // Each parameter's per-member norms [B], combined over parameters as
  // torch does (the norm of the norms; the max for inf).
  std::vector<at::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.reshape({array_size, -1}).norm(norm_type, /*dim=*/1));
  const auto stacked = at::stack(norms, /*dim=*/1);
  const auto total = std::isinf(norm_type) ? std::get<0>(stacked.max(/*dim=*/1)) : stacked.norm(norm_type, /*dim=*/1);
  const auto limit = max_norm.broadcastable(array_size, 1, total);
  const auto coef = (limit / (total + 1e-6)).clamp_max(1.0);
  for (auto g : grads) {
    std::vector<int64_t> shape(g.dim(), 1);
    shape[0] = array_size;
    g.mul_(coef.view(shape).to(g.dtype()));
  }
  return total;
}

void clip_grad_value_per_member(const std::vector<at::Tensor>& params, int64_t array_size,
                                const PerMember& clip_value) {
  clip_value.check(array_size, "clip_value");
  at::NoGradGuard no_grad;
  for (auto g : gradsOf(params, array_size)) {
    const auto limit = clip_value.broadcastable(array_size, g.dim(), g);
    g.copy_(at::clamp(g, -limit, limit));
  }
}

}  // namespace hfta::optim
