// RMSprop as torch::optim::RMSprop (the update: rules::RMSprop).
#include "runtime/optim/optimizers.h"

namespace hfta::optim {

FusedRMSprop::FusedRMSprop(std::vector<at::Tensor> params, int64_t array_size, RMSpropOptions o)
    : FusedOptimizer("RMSprop", std::move(params), array_size,
                     {{"lr", o.lr},
                      {"alpha", o.alpha},
                      {"eps", o.eps},
                      {"weight_decay", o.weight_decay},
                      {"momentum", o.momentum},
                      {"centered", o.centered}}) {
  checkAll();
}

void FusedRMSprop::check(const Hyper& h) const {
  for (const char* key : {"lr", "alpha", "eps", "weight_decay", "momentum"}) {
    checkRange(h, key, array_size(), 0, INFINITY);
  }
  checkRange(h, "centered", array_size(), 0, 1);
}

void FusedRMSprop::updateParameters(const std::vector<size_t>& indices) {
  const bool centered = anyNonZero("centered"), with_momentum = anyNonZero("momentum");
  const auto lr = values("lr"), alpha = values("alpha"), eps = values("eps"), weight_decay = values("weight_decay"),
             momentum = values("momentum"), member_centered = values("centered");
  applyRule<rules::RMSprop>(
      indices,
      [&](size_t i) -> std::array<at::Tensor*, rules::kMaxStates> {
        auto zeros = [&] { return at::zeros_like(params()[i]); };
        return {&state(i, "square_avg", zeros), centered ? &state(i, "grad_avg", zeros) : nullptr,
                with_momentum ? &state(i, "momentum_buffer", zeros) : nullptr};
      },
      [&](size_t) {
        std::vector<rules::RMSprop::Scalars> scalars;
        for (int64_t b = 0; b < array_size(); ++b) {
          scalars.push_back({lr[b], alpha[b], eps[b], weight_decay[b], momentum[b], member_centered[b] != 0});
        }
        return scalars;
      });
}

}  // namespace hfta::optim
