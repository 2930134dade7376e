// FusedGradScaler: torch.amp.GradScaler's scale, unscale_, step and update
// for each member with its own scale. The arithmetic is torch's: the
// inverse scale is float(1 / double(scale)), gradients are multiplied by
// it in their math type, and update() runs ATen's own _amp_update_scale_
// on each member's scale.
#include "runtime/optim/grad_scaler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include "runtime/optim/cpu_loop.h"
#include "runtime/optim/multi_tensor.h"

namespace hfta::optim {
namespace {

void checkEach(const std::vector<double>& values, const char* name, bool (*ok)(double), const char* range) {
  for (size_t b = 0; b < values.size(); ++b) {
    if (!ok(values[b])) {
      throw std::invalid_argument(
          fmt::format("GradScaler: {} of member {} is {}; it must be {}", name, b, values[b], range));
    }
  }
}

std::vector<double> expandedChecked(const PerMember& value, int64_t array_size, const char* name) {
  value.check(array_size, fmt::format("GradScaler {}", name));
  return value.expanded(array_size);
}

}  // namespace

FusedGradScaler::FusedGradScaler(int64_t array_size, GradScalerOptions o)
    : array_size_(array_size), found_inf_(std::max<int64_t>(array_size, 0), 0) {
  if (array_size_ < 1) throw std::invalid_argument("GradScaler: the array size must be at least 1");
  const auto init_scale = expandedChecked(o.init_scale, array_size_, "init_scale");
  growth_factor_ = expandedChecked(o.growth_factor, array_size_, "growth_factor");
  backoff_factor_ = expandedChecked(o.backoff_factor, array_size_, "backoff_factor");
  const auto interval = expandedChecked(o.growth_interval, array_size_, "growth_interval");
  checkEach(
      init_scale, "init_scale", [](double v) { return v > 0 && std::isfinite(v); }, "positive and finite");
  checkEach(
      growth_factor_, "growth_factor", [](double v) { return v > 1 && std::isfinite(v); }, "above 1");
  checkEach(
      backoff_factor_, "backoff_factor", [](double v) { return v > 0 && v < 1; }, "in (0, 1)");
  checkEach(
      interval, "growth_interval", [](double v) { return v >= 1 && v == std::floor(v) && v < 1e9; },
      "a whole number of steps, at least 1");
  growth_interval_.assign(interval.begin(), interval.end());
  scale_ = at::tensor(init_scale, at::kDouble).to(at::kFloat);
  growth_tracker_ = at::zeros({array_size_}, at::kInt);
}

at::Tensor FusedGradScaler::scale(const at::Tensor& losses) const {
  if (losses.dim() < 1 || losses.size(0) != array_size_) {
    throw std::invalid_argument(
        fmt::format("GradScaler: scale() takes the {} members' losses stacked on dim 0, got [{}]", array_size_,
                    fmt::join(losses.sizes(), ", ")));
  }
  std::vector<int64_t> shape(losses.dim(), 1);
  shape[0] = array_size_;
  return losses * scale_.to(losses.options()).view(shape);
}

void FusedGradScaler::unscale_(FusedOptimizer& optimizer) { unscale_(std::vector<FusedOptimizer*>{&optimizer}); }

void FusedGradScaler::unscale_(const std::vector<FusedOptimizer*>& optimizers) {
  for (const auto* optimizer : optimizers) {
    if (optimizer->array_size() != array_size_) {
      throw std::invalid_argument(
          fmt::format("GradScaler: {} members, the optimizer {}", array_size_, optimizer->array_size()));
    }
  }
  if (stage_ == Stage::Unscaled) {
    throw std::logic_error("GradScaler: unscale_() has already been called on this optimizer since the last update()");
  }
  if (stage_ == Stage::Stepped) throw std::logic_error("GradScaler: unscale_() is being called after step()");
  at::NoGradGuard no_grad;
  std::vector<float> inv_scale(array_size_);
  const auto scales = this->scales();
  for (int64_t b = 0; b < array_size_; ++b) inv_scale[b] = static_cast<float>(1.0 / scales[b]);
  std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> cuda_grads;  // by device and dtype
  auto found = std::make_unique<std::atomic<uint8_t>[]>(array_size_);
  for (int64_t b = 0; b < array_size_; ++b) found[b] = 0;
  std::vector<at::Tensor> params;
  for (const auto* optimizer : optimizers)
    params.insert(params.end(), optimizer->params().begin(), optimizer->params().end());
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    if (p.grad().scalar_type() == at::kHalf) {
      throw std::invalid_argument(
          "GradScaler: attempting to unscale float16 gradients; keep the parameters in float32 (autocast casts them)");
    }
    if (!p.grad().is_contiguous()) p.mutable_grad() = p.grad().contiguous();
    at::Tensor grad = p.grad();
    if (grad.is_cuda()) {
      cuda_grads[{grad.device().str(), grad.scalar_type()}].push_back(grad);
    } else {
      cpu::unscale(grad, inv_scale, found.get());
    }
  }
  for (auto& [key, grads] : cuda_grads) {
    auto found_on_device = at::zeros({array_size_}, at::TensorOptions(at::kFloat).device(grads[0].device()));
    cuda::multiTensorUnscale(grads, inv_scale, found_on_device);
    const auto flags = found_on_device.cpu();
    for (int64_t b = 0; b < array_size_; ++b) {
      if (flags[b].item<float>() != 0) found[b] = 1;
    }
  }
  for (int64_t b = 0; b < array_size_; ++b) found_inf_[b] = found[b].load();
  stage_ = Stage::Unscaled;
}

std::vector<uint8_t> FusedGradScaler::step(FusedOptimizer& optimizer) {
  return step(std::vector<FusedOptimizer*>{&optimizer});
}

std::vector<uint8_t> FusedGradScaler::step(const std::vector<FusedOptimizer*>& optimizers) {
  if (stage_ == Stage::Stepped)
    throw std::logic_error("GradScaler: step() has already been called since the last update()");
  if (stage_ == Stage::Ready) unscale_(optimizers);
  for (auto* optimizer : optimizers) optimizer->step(found_inf_);
  stage_ = Stage::Stepped;
  return found_inf_;
}

void FusedGradScaler::update() {
  if (stage_ == Stage::Ready) {
    throw std::logic_error("GradScaler: update() without a step: no inf checks were recorded since the last update()");
  }
  for (int64_t b = 0; b < array_size_; ++b) {
    auto scale = scale_.narrow(0, b, 1);
    auto tracker = growth_tracker_.narrow(0, b, 1);
    at::_amp_update_scale_(scale, tracker, at::full({1}, static_cast<float>(found_inf_[b]), at::kFloat),
                           growth_factor_[b], backoff_factor_[b], growth_interval_[b]);
  }
  std::fill(found_inf_.begin(), found_inf_.end(), 0);
  stage_ = Stage::Ready;
}

std::vector<double> FusedGradScaler::scales() const {
  const auto s = scale_.to(at::kDouble).contiguous();
  return {s.data_ptr<double>(), s.data_ptr<double>() + array_size_};
}

c10::IValue FusedGradScaler::state_dict() const {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  const auto tracker = growth_tracker_.to(at::kLong).contiguous();
  root.insert("scale", c10::List<double>(scales()));
  root.insert("growth_tracker", c10::List<int64_t>(std::vector<int64_t>(tracker.data_ptr<int64_t>(),
                                                                        tracker.data_ptr<int64_t>() + array_size_)));
  root.insert("growth_factor", c10::List<double>(growth_factor_));
  root.insert("backoff_factor", c10::List<double>(backoff_factor_));
  root.insert("growth_interval", c10::List<int64_t>(growth_interval_));
  return root;
}

void FusedGradScaler::load_state_dict(const c10::IValue& state) {
  auto fail = [](const std::string& why) {
    throw std::invalid_argument(fmt::format("GradScaler: cannot load this state: {}", why));
  };
  if (!state.isGenericDict()) fail("it is not a GradScaler state dict");
  const auto root = state.toGenericDict();
  for (const char* key : {"scale", "growth_tracker", "growth_factor", "backoff_factor", "growth_interval"}) {
    if (!root.contains(key)) fail(fmt::format("it has no \"{}\"", key));
  }
  const auto scale = root.at("scale").toDoubleVector();
  const auto tracker = root.at("growth_tracker").toIntVector();
  auto growth = root.at("growth_factor").toDoubleVector(), backoff = root.at("backoff_factor").toDoubleVector();
  auto interval = root.at("growth_interval").toIntVector();
  for (size_t n : {scale.size(), tracker.size(), growth.size(), backoff.size(), interval.size()}) {
    if (static_cast<int64_t>(n) != array_size_)
      fail(fmt::format("it is for {} members, this scaler has {}", n, array_size_));
  }
  scale_ = at::tensor(scale, at::kDouble).to(at::kFloat);
  growth_tracker_ = at::tensor(tracker, at::kLong).to(at::kInt);
  growth_factor_ = std::move(growth);
  backoff_factor_ = std::move(backoff);
  growth_interval_ = std::move(interval);
  std::fill(found_inf_.begin(), found_inf_.end(), 0);
  stage_ = Stage::Ready;
}

}  // namespace hfta::optim
