#pragma once
// The fused optimizers by the names hfta-train and hfta-tune give them, and
// their settings by the names of their hyper-parameters (lr, momentum,
// weight_decay, beta1, ...): one table, from which the commands make their
// flags and their messages.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace hfta::train {

struct OptimizerKind {
  std::string name;  // as torch.optim's class, lower case: sgd, adam, ...
  std::function<std::unique_ptr<optim::FusedOptimizer>(std::vector<at::Tensor>, int64_t)> make;
};
// sgd, adam, adamw, adagrad, rmsprop, adadelta, with torch.optim's defaults.
const std::vector<OptimizerKind>& optimizerKinds();
// "sgd, adam, adamw, adagrad, rmsprop or adadelta": for help and messages.
std::string optimizerNames();

struct OptimizerSetting {
  std::string name, help;  // help: which optimizers read it
};
// Every setting some optimizer reads, for the command line's flags.
const std::vector<OptimizerSetting>& optimizerSettings();

// The optimizer `name` over `params` with `settings` (each one value or one
// per member). SettingError for an unknown name or a setting it does not
// read; UserError for a bad value.
std::unique_ptr<optim::FusedOptimizer> makeOptimizer(const std::string& name, std::vector<at::Tensor> params,
                                                     int64_t array_size, const optim::Hyper& settings);

}  // namespace hfta::train
