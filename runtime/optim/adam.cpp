// Adam and AdamW as torch::optim::Adam / AdamW (the update: rules::Adam).
#include <cmath>

#include "runtime/optim/optimizers.h"

namespace hfta::optim {

FusedAdam::FusedAdam(std::vector<at::Tensor> params, int64_t array_size, AdamOptions options)
    : FusedAdam("Adam", std::move(params), array_size, std::move(options), false) {}

FusedAdam::FusedAdam(std::string name, std::vector<at::Tensor> params, int64_t array_size, AdamOptions o,
                     bool decoupled_weight_decay)
    : FusedOptimizer(std::move(name), std::move(params), array_size,
                     {{"lr", o.lr},
                      {"beta1", o.beta1},
                      {"beta2", o.beta2},
                      {"eps", o.eps},
                      {"weight_decay", o.weight_decay},
                      {"amsgrad", o.amsgrad}}),
      decoupled_weight_decay_(decoupled_weight_decay) {
  checkAll();
}

FusedAdamW::FusedAdamW(std::vector<at::Tensor> params, int64_t array_size, AdamOptions options)
    : FusedAdam("AdamW", std::move(params), array_size, std::move(options), true) {}

void FusedAdam::check(const Hyper& h) const {
  checkRange(h, "lr", array_size(), 0, INFINITY);
  checkRange(h, "beta1", array_size(), 0, 1, /*hi_open=*/true);
  checkRange(h, "beta2", array_size(), 0, 1, /*hi_open=*/true);
  checkRange(h, "eps", array_size(), 0, INFINITY);
  checkRange(h, "weight_decay", array_size(), 0, INFINITY);
  checkRange(h, "amsgrad", array_size(), 0, 1);
}

void FusedAdam::updateParameters(const std::vector<size_t>& indices) {
  const bool amsgrad = anyNonZero("amsgrad");
  const auto lr = values("lr"), beta1 = values("beta1"), beta2 = values("beta2"), eps = values("eps"),
             weight_decay = values("weight_decay"), member_amsgrad = values("amsgrad");
  applyRule<rules::Adam>(
      indices,
      [&](size_t i) -> std::array<at::Tensor*, rules::kMaxStates> {
        auto zeros = [&] { return at::zeros_like(params()[i]); };
        return {&state(i, "exp_avg", zeros), &state(i, "exp_avg_sq", zeros),
                amsgrad ? &state(i, "max_exp_avg_sq", zeros) : nullptr};
      },
      [&](size_t i) {
        std::vector<rules::Adam::Scalars> scalars;
        for (int64_t b = 0; b < array_size(); ++b) {
          const auto t = static_cast<double>(stepsOf(i, b));
          const double wd = weight_decay[b];
          scalars.push_back({lr[b] / (1 - std::pow(beta1[b], t)), std::sqrt(1 - std::pow(beta2[b], t)), beta1[b],
                             beta2[b], eps[b], decoupled_weight_decay_ ? 0.0 : wd,
                             decoupled_weight_decay_ ? 1 - lr[b] * wd : 1.0, member_amsgrad[b] != 0});
        }
        return scalars;
      });
}

}  // namespace hfta::optim
