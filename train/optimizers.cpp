#include "train/optimizers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "runtime/optim/optimizers.h"
#include "support/user_error.h"
#include "train/setting_error.h"

namespace hfta::train {

const std::vector<OptimizerKind>& optimizerKinds() {
  using namespace optim;
  using Params = std::vector<at::Tensor>;
  static const std::vector<OptimizerKind> kinds{
      {"sgd", [](Params p, int64_t b) { return std::make_unique<FusedSGD>(std::move(p), b, SGDOptions{}); }},
      {"adam", [](Params p, int64_t b) { return std::make_unique<FusedAdam>(std::move(p), b, AdamOptions{}); }},
      {"adamw", [](Params p, int64_t b) { return std::make_unique<FusedAdamW>(std::move(p), b); }},
      {"adagrad",
       [](Params p, int64_t b) { return std::make_unique<FusedAdagrad>(std::move(p), b, AdagradOptions{}); }},
      {"rmsprop",
       [](Params p, int64_t b) { return std::make_unique<FusedRMSprop>(std::move(p), b, RMSpropOptions{}); }},
      {"adadelta",
       [](Params p, int64_t b) { return std::make_unique<FusedAdadelta>(std::move(p), b, AdadeltaOptions{}); }},
  };
  return kinds;
}

std::string optimizerNames() {
  std::vector<std::string> names;
  for (const auto& kind : optimizerKinds()) names.push_back(kind.name);
  const std::string last = names.back();
  names.pop_back();
  return fmt::format("{} or {}", fmt::join(names, ", "), last);
}

const std::vector<OptimizerSetting>& optimizerSettings() {
  // Read off the optimizers themselves (an optimizer of one member over
  // one number), so that a new setting of theirs is a flag at once.
  static const std::vector<OptimizerSetting> settings = [] {
    std::map<std::string, std::vector<std::string>> readers;
    for (const auto& kind : optimizerKinds()) {
      const auto optimizer = kind.make({at::zeros({1, 1})}, 1);
      for (const auto& [name, value] : optimizer->hyper()) readers[name].push_back(kind.name);
    }
    std::vector<OptimizerSetting> out;
    for (const auto& [name, optimizers] : readers) {
      out.push_back({name, fmt::format("{} of {}", name, fmt::join(optimizers, ", "))});
    }
    return out;
  }();
  return settings;
}

std::unique_ptr<optim::FusedOptimizer> makeOptimizer(const std::string& name, std::vector<at::Tensor> params,
                                                     int64_t array_size, const optim::Hyper& settings) {
  const auto& kinds = optimizerKinds();
  const auto kind = std::find_if(kinds.begin(), kinds.end(), [&](const OptimizerKind& k) { return k.name == name; });
  if (kind == kinds.end()) {
    throw SettingError("optimizer", fmt::format("unknown optimizer {}: use {}", name, optimizerNames()));
  }
  try {
    auto made = kind->make(std::move(params), array_size);
    for (const auto& [key, value] : settings) {
      if (!made->hyper().count(key)) {
        std::vector<std::string> known;
        for (const auto& [k, v] : made->hyper()) known.push_back(k);
        throw SettingError(key,
                           fmt::format("{} has no such setting; its settings are {}", name, fmt::join(known, ", ")));
      }
      made->set_hyper(key, value);
    }
    return made;
  } catch (const std::invalid_argument& e) {
    throw UserError(e.what());
  }
}

}  // namespace hfta::train
