// Adagrad as torch::optim::Adagrad (the update: rules::Adagrad); the sum
// of squared gradients starts at initial_accumulator_value.
#include "runtime/optim/optimizers.h"

namespace hfta::optim {

FusedAdagrad::FusedAdagrad(std::vector<at::Tensor> params, int64_t array_size, AdagradOptions o)
    : FusedOptimizer("Adagrad", std::move(params), array_size,
                     {{"lr", o.lr},
                      {"lr_decay", o.lr_decay},
                      {"weight_decay", o.weight_decay},
                      {"initial_accumulator_value", o.initial_accumulator_value},
                      {"eps", o.eps}}) {
  checkAll();
}

void FusedAdagrad::check(const Hyper& h) const {
  for (const char* key : {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"}) {
    checkRange(h, key, array_size(), 0, INFINITY);
  }
}

void FusedAdagrad::updateParameters(const std::vector<size_t>& indices) {
  const auto lr = values("lr"), lr_decay = values("lr_decay"), weight_decay = values("weight_decay"),
             eps = values("eps");
  applyRule<rules::Adagrad>(
      indices,
      [&](size_t i) -> std::array<at::Tensor*, rules::kMaxStates> {
        const auto& p = params()[i];
        return {&state(i, "sum", [&] {
          return hyper("initial_accumulator_value").broadcastable(array_size(), p.dim(), p).expand_as(p).clone();
        })};
      },
      [&](size_t i) {
        std::vector<rules::Adagrad::Scalars> scalars;
        for (int64_t b = 0; b < array_size(); ++b) {
          const auto t = static_cast<double>(stepsOf(i, b));
          scalars.push_back({lr[b] / (1 + (t - 1) * lr_decay[b]), weight_decay[b], eps[b]});
        }
        return scalars;
      });
}

}  // namespace hfta::optim
