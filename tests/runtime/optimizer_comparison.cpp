#include "tests/runtime/optimizer_comparison.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/test_support.h"

namespace hfta::optim::testing {

using hfta::testing::allClose;

std::vector<at::Tensor> stackedParameters() {
  torch::manual_seed(3);
  return {torch::randn({kMembers, 7, 5}), torch::randn({kMembers, 5}), torch::randn({kMembers, 20000}) * 0.1};
}

void setRandomGradients(const std::vector<at::Tensor>& params, int step) {
  torch::manual_seed(100 + step);
  for (const auto& p : params) p.mutable_grad() = torch::randn(p.sizes()).to(p.device());
}

void compareWithTorchOptim(const MakeFused& make_fused, const MakeAlone& make_alone, const torch::Device& device,
                           NanMember nan, int steps, double tolerance) {
  auto stacked = stackedParameters();
  std::vector<std::vector<at::Tensor>> alone(kMembers);
  std::vector<std::unique_ptr<torch::optim::Optimizer>> torch_optims;
  for (int64_t b = 0; b < kMembers; ++b) {
    for (const auto& p : stacked) alone[b].push_back(p[b].clone().requires_grad_(true));
    torch_optims.push_back(make_alone(b, alone[b]));
  }
  for (auto& p : stacked) p = p.to(device).requires_grad_(true);
  auto fused = make_fused(stacked);
  for (int step = 0; step < steps; ++step) {
    const bool nan_from_here = nan.member >= 0 && step >= nan.step;
    torch::manual_seed(100 + step);
    for (size_t i = 0; i < stacked.size(); ++i) {
      auto grad = torch::randn(stacked[i].sizes());
      if (nan_from_here) grad[nan.member].fill_(std::numeric_limits<float>::quiet_NaN());
      stacked[i].mutable_grad() = grad.to(device);
      for (int64_t b = 0; b < kMembers; ++b) alone[b][i].mutable_grad() = grad[b].clone();
    }
    if (nan_from_here && step == nan.step) fused->freeze(nan.member);
    fused->step();
    // Alone, the NaN member stops where its run would be stopped.
    for (int64_t b = 0; b < kMembers; ++b) {
      if (!(nan_from_here && b == nan.member)) torch_optims[b]->step();
    }
  }
  if (nan.member >= 0) EXPECT_TRUE(fused->frozen(nan.member)) << fused->name();
  for (size_t i = 0; i < stacked.size(); ++i) {
    for (int64_t b = 0; b < kMembers; ++b) {
      ASSERT_TRUE(alone[b][i].isfinite().all().item<bool>()) << "the reference of member " << b << " diverged";
      EXPECT_TRUE(allClose(stacked[i][b].cpu(), alone[b][i], tolerance))
          << fused->name() << ": param " << i << " member " << b << (b == nan.member ? " (frozen)" : "");
    }
  }
}

void compareAdadeltaWithTorchOptim(const torch::Device& device) {
  hfta::testing::Reference ref("optim_reference.pt");
  const auto init = ref.tensors("adadelta_init");
  const auto grads = ref.tensors("adadelta_grads");
  const auto trained = ref.tensors("adadelta_trained");
  const auto hyper = ref.tensors("adadelta_hyper");
  auto values = [&](const char* key) {
    const auto t = hyper.at(key).contiguous();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  };
  std::vector<at::Tensor> params{init.at("p0").to(device).requires_grad_(true),
                                 init.at("p1").to(device).requires_grad_(true)};
  FusedAdadelta adadelta(params, params[0].size(0),
                         AdadeltaOptions{values("lr"), values("rho"), values("eps"), values("weight_decay")});
  for (int64_t step = 0; step < grads.at("p0").size(0); ++step) {
    params[0].mutable_grad() = grads.at("p0")[step].to(device);
    params[1].mutable_grad() = grads.at("p1")[step].to(device);
    adadelta.step();
  }
  EXPECT_TRUE(allClose(params[0].cpu(), trained.at("p0"), 1e-5)) << device;
  EXPECT_TRUE(allClose(params[1].cpu(), trained.at("p1"), 1e-5)) << device;
}

namespace {

template <typename Fused, typename Options>
MakeFused fusedWith(Options options) {
  return [options](std::vector<at::Tensor> params) {
    return std::make_unique<Fused>(std::move(params), kMembers, options);
  };
}

}  // namespace

std::vector<OptimizerCase> torchOptimCases() {
  using Params = std::vector<at::Tensor>;
  std::vector<OptimizerCase> cases;
  {
    const std::vector<double> lr{0.1, 0.05, 0.01, 0.2}, momentum{0.0, 0.9, 0.5, 0.9}, dampening{0.0, 0.0, 0.3, 0.0},
        wd{0.0, 1e-2, 0.0, 1e-3}, nesterov{0, 1, 0, 0};
    cases.push_back(
        {"SGD", fusedWith<FusedSGD>(SGDOptions{lr, momentum, dampening, wd, nesterov}), [=](int64_t b, Params p) {
           return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(lr[b])
                                                             .momentum(momentum[b])
                                                             .dampening(dampening[b])
                                                             .weight_decay(wd[b])
                                                             .nesterov(nesterov[b] != 0));
         }});
  }
  const std::vector<double> lr{1e-3, 5e-3, 1e-2, 2e-3}, beta1{0.9, 0.8, 0.95, 0.5}, beta2{0.999, 0.99, 0.9, 0.995},
      eps{1e-8, 1e-6, 1e-8, 1e-7}, amsgrad{0, 1, 0, 1};
  {
    const std::vector<double> wd{0.0, 1e-2, 0.0, 1e-3};
    cases.push_back(
        {"Adam", fusedWith<FusedAdam>(AdamOptions{lr, beta1, beta2, eps, wd, amsgrad}), [=](int64_t b, Params p) {
           return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(lr[b])
                                                              .betas({beta1[b], beta2[b]})
                                                              .eps(eps[b])
                                                              .weight_decay(wd[b])
                                                              .amsgrad(amsgrad[b] != 0));
         }});
  }
  {
    const std::vector<double> wd{1e-2, 0.1, 0.0, 1e-3};
    cases.push_back(
        {"AdamW", fusedWith<FusedAdamW>(AdamOptions{lr, beta1, beta2, eps, wd, amsgrad}), [=](int64_t b, Params p) {
           return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(lr[b])
                                                               .betas({beta1[b], beta2[b]})
                                                               .eps(eps[b])
                                                               .weight_decay(wd[b])
                                                               .amsgrad(amsgrad[b] != 0));
         }});
  }
  {
    const std::vector<double> lr{0.1, 0.05, 0.01, 0.2}, lr_decay{0.0, 1e-2, 0.0, 1e-3}, wd{0.0, 1e-2, 0.0, 0.0},
        init{0.0, 0.1, 0.5, 0.0}, eps{1e-10, 1e-8, 1e-10, 1e-6};
    cases.push_back(
        {"Adagrad", fusedWith<FusedAdagrad>(AdagradOptions{lr, lr_decay, wd, init, eps}), [=](int64_t b, Params p) {
           return std::make_unique<torch::optim::Adagrad>(p, torch::optim::AdagradOptions(lr[b])
                                                                 .lr_decay(lr_decay[b])
                                                                 .weight_decay(wd[b])
                                                                 .initial_accumulator_value(init[b])
                                                                 .eps(eps[b]));
         }});
  }
  {
    const std::vector<double> lr{1e-2, 5e-3, 1e-3, 2e-2}, alpha{0.99, 0.9, 0.95, 0.8}, eps{1e-8, 1e-6, 1e-8, 1e-7},
        wd{0.0, 1e-2, 0.0, 0.0}, momentum{0.0, 0.9, 0.5, 0.0}, centered{0, 1, 1, 0};
    cases.push_back({"RMSprop", fusedWith<FusedRMSprop>(RMSpropOptions{lr, alpha, eps, wd, momentum, centered}),
                     [=](int64_t b, Params p) {
                       return std::make_unique<torch::optim::RMSprop>(p, torch::optim::RMSpropOptions(lr[b])
                                                                             .alpha(alpha[b])
                                                                             .eps(eps[b])
                                                                             .weight_decay(wd[b])
                                                                             .momentum(momentum[b])
                                                                             .centered(centered[b] != 0));
                     }});
  }
  return cases;
}

}  // namespace hfta::optim::testing
