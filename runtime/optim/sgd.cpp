// SGD as torch::optim::SGD (the update: rules::Sgd). A member without
// momentum keeps dampening 0, so its buffer equals its gradient and it sees
// plain SGD, as alone.
#include <fmt/format.h>

#include "runtime/optim/optimizers.h"

namespace hfta::optim {

FusedSGD::FusedSGD(std::vector<at::Tensor> params, int64_t array_size, SGDOptions o)
    : FusedOptimizer("SGD", std::move(params), array_size,
                     {{"lr", o.lr},
                      {"momentum", o.momentum},
                      {"dampening", o.dampening},
                      {"weight_decay", o.weight_decay},
                      {"nesterov", o.nesterov}}) {
  checkAll();
}

void FusedSGD::check(const Hyper& h) const {
  checkRange(h, "lr", array_size(), 0, INFINITY);
  checkRange(h, "momentum", array_size(), 0, INFINITY);
  checkRange(h, "weight_decay", array_size(), 0, INFINITY);
  checkRange(h, "nesterov", array_size(), 0, 1);
  for (int64_t b = 0; b < array_size(); ++b) {
    if (h.at("nesterov").at(b) != 0 && (h.at("momentum").at(b) <= 0 || h.at("dampening").at(b) != 0)) {
      throw std::invalid_argument(
          fmt::format("SGD: member {} uses nesterov, which needs momentum > 0 and dampening 0", b));
    }
  }
}

void FusedSGD::updateParameters(const std::vector<size_t>& indices) {
  const bool with_momentum = anyNonZero("momentum");
  const auto lr = values("lr"), momentum = values("momentum"), dampening = values("dampening"),
             weight_decay = values("weight_decay"), nesterov = values("nesterov");
  applyRule<rules::Sgd>(
      indices,
      [&](size_t i) -> std::array<at::Tensor*, rules::kMaxStates> {
        if (!with_momentum) return {};
        return {&state(i, "momentum_buffer", [&] { return at::zeros_like(params()[i]); })};
      },
      [&](size_t i) {
        std::vector<rules::Sgd::Scalars> scalars;
        for (int64_t b = 0; b < array_size(); ++b) {
          scalars.push_back({lr[b], momentum[b], momentum[b] == 0 ? 1.0 : 1 - dampening[b], weight_decay[b],
                             nesterov[b] != 0, /*first=*/stepsOf(i, b) == 1, with_momentum});
        }
        return scalars;
      });
}

}  // namespace hfta::optim
