// Adadelta as torch.optim.Adadelta, which LibTorch lacks (the update:
// rules::Adadelta).
#include "runtime/optim/optimizers.h"

namespace hfta::optim {

FusedAdadelta::FusedAdadelta(std::vector<at::Tensor> params, int64_t array_size, AdadeltaOptions o)
    : FusedOptimizer("Adadelta", std::move(params), array_size,
                     {{"lr", o.lr}, {"rho", o.rho}, {"eps", o.eps}, {"weight_decay", o.weight_decay}}) {
  checkAll();
}

void FusedAdadelta::check(const Hyper& h) const {
  checkRange(h, "lr", array_size(), 0, INFINITY);
  checkRange(h, "rho", array_size(), 0, 1);
  checkRange(h, "eps", array_size(), 0, INFINITY);
  checkRange(h, "weight_decay", array_size(), 0, INFINITY);
}

void FusedAdadelta::updateParameters(const std::vector<size_t>& indices) {
  const auto lr = values("lr"), rho = values("rho"), eps = values("eps"), weight_decay = values("weight_decay");
  applyRule<rules::Adadelta>(
      indices,
      [&](size_t i) -> std::array<at::Tensor*, rules::kMaxStates> {
        auto zeros = [&] { return at::zeros_like(params()[i]); };
        return {&state(i, "square_avg", zeros), &state(i, "acc_delta", zeros)};
      },
      [&](size_t) {
        std::vector<rules::Adadelta::Scalars> scalars;
        for (int64_t b = 0; b < array_size(); ++b) scalars.push_back({lr[b], rho[b], eps[b], weight_decay[b]});
        return scalars;
      });
}

}  // namespace hfta::optim
