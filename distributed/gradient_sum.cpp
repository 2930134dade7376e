#include "distributed/gradient_sum.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace hfta::distributed {

OverlappedGradientSum::OverlappedGradientSum(Group& group, std::vector<at::Tensor> params, int64_t bucket_bytes)
    : group_(group), params_(std::move(params)), bucket_of_(params_.size()), in_(params_.size(), false) {
  // Reverse order, one dtype and device per bucket.
  for (size_t i = params_.size(); i-- > 0;) {
    const auto& p = params_[i];
    const int64_t bytes = p.numel() * p.element_size();
    const auto fits = [&](const Bucket& bucket) {
      const auto& first = params_[bucket.params.front()];
      return first.scalar_type() == p.scalar_type() && first.device() == p.device() &&
             bucket.bytes + bytes <= bucket_bytes;
    };
    if (buckets_.empty() || !fits(buckets_.back())) buckets_.emplace_back();
    buckets_.back().params.push_back(i);
    buckets_.back().bytes += bytes;
    bucket_of_[i] = buckets_.size() - 1;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    hooks_.push_back(accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          arrived(i);
          return outputs;
        })));
    accumulators_.push_back(std::move(accumulator));
  }
}

OverlappedGradientSum::~OverlappedGradientSum() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hooks_[i]);
}

void OverlappedGradientSum::begin() {
  armed_ = true;
  next_ = 0;
  in_.assign(params_.size(), false);
  for (auto& bucket : buckets_) {
    bucket.waiting = static_cast<int64_t>(bucket.params.size());
    bucket.work.reset();
  }
}

void OverlappedGradientSum::arrived(size_t param) {
  if (!armed_ || in_[param]) return;
  in_[param] = true;
  --buckets_[bucket_of_[param]].waiting;
  startReady();
}

void OverlappedGradientSum::startReady() {
  for (; next_ < buckets_.size() && buckets_[next_].waiting == 0; ++next_) {
    auto& bucket = buckets_[next_];
    std::vector<at::Tensor> parts;
    for (size_t i : bucket.params) parts.push_back(params_[i].grad().reshape(-1));
    std::vector<at::Tensor> flat{at::cat(parts)};
    bucket.flat = flat[0];
    bucket.work = group_.startSum(flat);
  }
}

void OverlappedGradientSum::finish() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (in_[i]) continue;
    if (!params_[i].grad().defined()) params_[i].mutable_grad() = at::zeros_like(params_[i]);
    in_[i] = true;
    --buckets_[bucket_of_[i]].waiting;
  }
  startReady();
  armed_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& bucket : buckets_) works.push_back(bucket.work);
  group_.wait(works, "all-reduce of the gradients");
  for (auto& bucket : buckets_) {
    int64_t offset = 0;
    for (size_t i : bucket.params) {
      auto grad = params_[i].mutable_grad();
      grad.copy_(bucket.flat.narrow(0, offset, grad.numel()).view(grad.sizes()));
      offset += grad.numel();
    }
  }
}

}  // namespace hfta::distributed
