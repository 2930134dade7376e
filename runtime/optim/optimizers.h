#pragma once
// The fused optimizers. Each follows LibTorch's torch::optim (or, for
// Adadelta, which LibTorch lacks, torch.optim) update for every member with
// that member's hyper-parameters. Every numeric option is one value for all
// members or one per member; flags (nesterov, amsgrad, centered) are 0 or 1.
#include "runtime/optim/optimizer.h"

namespace hfta::optim {

struct SGDOptions {
  PerMember lr = 0.01;
  PerMember momentum = 0.0;
  PerMember dampening = 0.0;
  PerMember weight_decay = 0.0;
  PerMember nesterov = 0.0;
};

class FusedSGD : public FusedOptimizer {
 public:
  FusedSGD(std::vector<at::Tensor> params, int64_t array_size, SGDOptions options);

 protected:
  void updateParameters(const std::vector<size_t>& indices) override;
  void check(const Hyper& hyper) const override;
};

struct AdamOptions {
  PerMember lr = 1e-3;
  PerMember beta1 = 0.9;
  PerMember beta2 = 0.999;
  PerMember eps = 1e-8;
  PerMember weight_decay = 0.0;  // L2 (Adam) or decoupled (AdamW)
  PerMember amsgrad = 0.0;
};

class FusedAdam : public FusedOptimizer {
 public:
  FusedAdam(std::vector<at::Tensor> params, int64_t array_size, AdamOptions options);

 protected:
  // AdamW: decoupled weight decay.
  FusedAdam(std::string name, std::vector<at::Tensor> params, int64_t array_size, AdamOptions options,
            bool decoupled_weight_decay);
  void updateParameters(const std::vector<size_t>& indices) override;
  void check(const Hyper& hyper) const override;

 private:
  bool decoupled_weight_decay_ = false;
};

// AdamW's weight_decay defaults to 1e-2, as in torch.
inline AdamOptions adamWDefaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  return o;
}

class FusedAdamW : public FusedAdam {
 public:
  FusedAdamW(std::vector<at::Tensor> params, int64_t array_size, AdamOptions options = adamWDefaults());
};

struct AdagradOptions {
  PerMember lr = 1e-2;
  PerMember lr_decay = 0.0;
  PerMember weight_decay = 0.0;
  PerMember initial_accumulator_value = 0.0;
  PerMember eps = 1e-10;
};

class FusedAdagrad : public FusedOptimizer {
 public:
  FusedAdagrad(std::vector<at::Tensor> params, int64_t array_size, AdagradOptions options);

 protected:
  void updateParameters(const std::vector<size_t>& indices) override;
  void check(const Hyper& hyper) const override;
};

struct RMSpropOptions {
  PerMember lr = 1e-2;
  PerMember alpha = 0.99;
  PerMember eps = 1e-8;
  PerMember weight_decay = 0.0;
  PerMember momentum = 0.0;
  PerMember centered = 0.0;
};

class FusedRMSprop : public FusedOptimizer {
 public:
  FusedRMSprop(std::vector<at::Tensor> params, int64_t array_size, RMSpropOptions options);

 protected:
  void updateParameters(const std::vector<size_t>& indices) override;
  void check(const Hyper& hyper) const override;
};

struct AdadeltaOptions {
  PerMember lr = 1.0;
  PerMember rho = 0.9;
  PerMember eps = 1e-6;
  PerMember weight_decay = 0.0;
};

class FusedAdadelta : public FusedOptimizer {
 public:
  FusedAdadelta(std::vector<at::Tensor> params, int64_t array_size, AdadeltaOptions options);

 protected:
  void updateParameters(const std::vector<size_t>& indices) override;
  void check(const Hyper& hyper) const override;
};

}  // namespace hfta::optim
