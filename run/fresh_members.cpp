#include "run/fresh_members.h"

#include <fmt/format.h>
#include <torch/nn/init.h>
#include <torch/torch.h>

#include <cmath>

#include "hfta/hfta.h"
#include "support/strings.h"
#include "support/torch_types.h"
#include "train/setting_error.h"

namespace hfta::train {
namespace {

bool isLinearOrConv(const std::string& type) {
  for (const char* name : {".linear.Linear", ".conv.Conv1d", ".conv.Conv2d", ".conv.Conv3d", ".conv.ConvTranspose1d",
                           ".conv.ConvTranspose2d", ".conv.ConvTranspose3d"}) {
    if (endsWith(type, name)) return true;
  }
  return false;
}

bool isBatchNorm(const std::string& type) {
  return endsWith(type, ".batchnorm.BatchNorm1d") || endsWith(type, ".batchnorm.BatchNorm2d") ||
         endsWith(type, ".batchnorm.BatchNorm3d");
}

}  // namespace

torch::jit::Module reinitialized(const torch::jit::Module& model, uint64_t seed) {
  torch::jit::Module fresh = model.clone();
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (const auto& named : fresh.named_modules()) {
    auto m = named.value;
    const std::string type = demangledTypeName(m.type());
    const bool has_own_parameters = m.named_parameters(/*recurse=*/false).size() > 0;
    if (isLinearOrConv(type)) {
      auto weight = m.attr("weight").toTensor();
      torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
      const auto bias = m.attr("bias");
      if (bias.isTensor()) {
        const auto fan_in = weight.size(1) * (weight.dim() > 2 ? weight[0][0].numel() : 1);
        const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
        bias.toTensor().uniform_(-bound, bound);
      }
    } else if (isBatchNorm(type)) {
      for (const char* stat : {"running_mean", "running_var", "num_batches_tracked"}) {
        if (!m.hasattr(stat) || !m.attr(stat).isTensor()) continue;
        auto t = m.attr(stat).toTensor();
        std::string(stat) == "running_var" ? t.fill_(1) : t.zero_();
      }
      if (m.attr("weight").isTensor()) m.attr("weight").toTensor().fill_(1);
      if (m.attr("bias").isTensor()) m.attr("bias").toTensor().zero_();
    } else if (has_own_parameters) {
      throw SettingError("array_size", fmt::format("cannot make fresh members: {} ({}) cannot be "
                                                   "re-initialized the way PyTorch does. Fuse B model files, one "
                                                   "per member, with hfta-fuse instead",
                                                   named.name.empty() ? "the model" : named.name, type));
    }
  }
  return fresh;
}

torch::jit::Module freshArray(const torch::jit::Module& model, const std::vector<uint64_t>& seeds,
                              const std::string& source) {
  std::vector<Member> members;
  for (uint64_t seed : seeds)
    members.push_back({reinitialized(model, seed), fmt::format("{} (seed {})", source, seed)});
  FuseOptions options;
  options.allow_single_member = true;
  return fuse(members, options).module;
}

}  // namespace hfta::train
