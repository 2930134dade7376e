#include "runtime/sgd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace hfta::optim {

FusedSGD::FusedSGD(std::vector<at::Tensor> params, int64_t array_size, SGDOptions options)
    : params_(std::move(params)), array_size_(array_size), options_(std::move(options)) {
  if (array_size_ < 1) throw std::invalid_argument("FusedSGD: array size must be >= 1");
  options_.lr.check(array_size_, "lr");
  options_.momentum.check(array_size_, "momentum");
  options_.dampening.check(array_size_, "dampening");
  options_.weight_decay.check(array_size_, "weight_decay");
  options_.nesterov.check(array_size_, "nesterov");
  for (int64_t b = 0; b < array_size_; ++b) {
    if (options_.lr.at(b) < 0) {
      throw std::invalid_argument(fmt::format("lr of member {} is negative ({})", b, options_.lr.at(b)));
    }
    if (options_.nesterov.at(b) != 0 &&
        (options_.momentum.at(b) <= 0 || options_.dampening.at(b) != 0)) {
      throw std::invalid_argument(fmt::format(
          "member {}: nesterov momentum requires a momentum > 0 and zero dampening", b));
    }
    any_momentum_ = any_momentum_ || options_.momentum.at(b) != 0;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (p.dim() < 1 || p.size(0) != array_size_) {
      throw std::invalid_argument(fmt::format(
          "FusedSGD: parameter {} has shape [{}], expected {} members stacked on dim 0",
          i, fmt::join(p.sizes(), ", "), array_size_));
    }
  }
  momentum_buffers_.resize(params_.size());
}

void FusedSGD::set_lr(PerMember lr) {
  lr.check(array_size_, "lr");
  options_.lr = std::move(lr);
}

void FusedSGD::zero_grad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

void FusedSGD::step() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
#ifdef HFTA_WITH_CUDA
    if (params_[i].is_cuda()) {
      const bool first = !momentum_buffers_[i].defined();
      if (any_momentum_ && first) momentum_buffers_[i] = at::empty_like(params_[i]);
      std::vector<double> hyper;
      for (const auto* h : {&options_.lr, &options_.momentum, &options_.dampening,
                            &options_.weight_decay, &options_.nesterov}) {
        auto v = h->expanded(array_size_);
        hyper.insert(hyper.end(), v.begin(), v.end());
      }
      auto hyper_t = at::tensor(hyper, at::kDouble).to(params_[i].device(), /*non_blocking=*/true);
      cuda::sgdStep(params_[i], params_[i].grad(), momentum_buffers_[i], hyper_t, first);
      continue;
    }
#endif
    stepCpuOrComposite(i);
  }
}

// torch.optim.SGD's update, with every hyper-parameter a [B, 1, ...] tensor:
//   d = g + wd * p
//   buf = d (first step) | momentum * buf + (1 - dampening) * d
//   d = d + momentum * buf (nesterov) | buf
//   p -= lr * d
// A member without momentum gets dampening 0, so buf == d and the member
// sees plain SGD, as torch does.
void FusedSGD::stepCpuOrComposite(size_t i) {
  auto& p = params_[i];
  const auto rank = p.dim();
  auto d = p.grad();
  if (!options_.weight_decay.uniform() || options_.weight_decay.at(0) != 0) {
    d = d + options_.weight_decay.broadcastable(array_size_, rank, p) * p;
  }
  if (any_momentum_) {
    auto& buf = momentum_buffers_[i];
    const auto momentum = options_.momentum.broadcastable(array_size_, rank, p);
    if (!buf.defined()) {
      buf = d.clone();
    } else {
      std::vector<double> damp(array_size_);
      for (int64_t b = 0; b < array_size_; ++b) {
        damp[b] = options_.momentum.at(b) == 0 ? 0.0 : options_.dampening.at(b);
      }
      const auto one_minus_damp =
          1 - PerMember(damp).broadcastable(array_size_, rank, p);
      buf.mul_(momentum).addcmul_(d, one_minus_damp);
    }
    d = options_.nesterov.uniform() && options_.nesterov.at(0) == 0
            ? buf
            : at::where(options_.nesterov.broadcastable(array_size_, rank, p) != 0,
                        d + momentum * buf, buf);
  }
  p.addcmul_(d, options_.lr.broadcastable(array_size_, rank, p), -1);
}

}  // namespace hfta::optim
