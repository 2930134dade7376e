#include "train/optimizer_factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "passes/hfta/hfta.h"
#include "runtime/optim/optimizers.h"
#include "train/setting_error.h"

namespace hfta::train {

std::unique_ptr<optim::FusedOptimizer> makeOptimizer(const std::string& name, std::vector<at::Tensor> params,
                                                     int64_t array_size, const optim::Hyper& settings) {
  using namespace optim;
  std::unique_ptr<FusedOptimizer> made;
  try {
    if (name == "sgd") {
      made = std::make_unique<FusedSGD>(std::move(params), array_size, SGDOptions{});
    } else if (name == "adam") {
      made = std::make_unique<FusedAdam>(std::move(params), array_size, AdamOptions{});
    } else if (name == "adamw") {
      made = std::make_unique<FusedAdamW>(std::move(params), array_size);
    } else if (name == "adagrad") {
      made = std::make_unique<FusedAdagrad>(std::move(params), array_size, AdagradOptions{});
    } else if (name == "rmsprop") {
      made = std::make_unique<FusedRMSprop>(std::move(params), array_size, RMSpropOptions{});
    } else if (name == "adadelta") {
      made = std::make_unique<FusedAdadelta>(std::move(params), array_size, AdadeltaOptions{});
    } else {
      throw SettingError("optimizer",
                         fmt::format("unknown optimizer {}: use sgd, adam, adamw, adagrad, rmsprop or adadelta", name));
    }
    for (const auto& [key, value] : settings) {
      if (!made->hyper().count(key)) {
        std::vector<std::string> known;
        for (const auto& [k, v] : made->hyper()) known.push_back(k);
        throw SettingError(key,
                           fmt::format("{} has no such setting; its settings are {}", name, fmt::join(known, ", ")));
      }
      made->set_hyper(key, value);
    }
  } catch (const std::invalid_argument& e) {
    throw UserError(e.what());
  }
  return made;
}

}  // namespace hfta::train
