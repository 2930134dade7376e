#pragma once
// Builds a fused optimizer by name, with per-member settings by the names of
// its hyper-parameters (lr, momentum, weight_decay, beta1, ...). Unknown
// names and bad values are hfta::UserError saying what is accepted.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace hfta::train {

std::unique_ptr<optim::FusedOptimizer> makeOptimizer(const std::string& name, std::vector<at::Tensor> params,
                                                     int64_t array_size, const optim::Hyper& settings);

}  // namespace hfta::train
