#include "train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>

#include "passes/hfta/hfta.h"
#include "passes/ir/diagnostics.h"
#include "train/setting_error.h"

namespace hfta::train {

Trainer::Trainer(torch::jit::Module fused, optim::FusedOptimizer& optimizer, TrainOptions options)
    : module_(std::move(fused)),
      optimizer_(optimizer),
      options_(std::move(options)),
      array_size_(hfta::arraySize(module_)),
      shared_input_(hfta::sharedInput(module_)) {
  progress_.loss_sum.assign(array_size_, 0.0);
  progress_.diverged.assign(array_size_, false);
  if (optimizer_.array_size() != array_size_) {
    throw UserError(
        fmt::format("the optimizer has {} members, the fused module {}", optimizer_.array_size(), array_size_));
  }
  if (shared_input_ && !options_.same_batches) {
    throw SettingError("own_streams",
                       "this module was fused with a shared input (hfta-fuse --shared-input): "
                       "every member sees the same batches");
  }
  if (options_.loss != "cross_entropy" && options_.loss != "mse" && options_.loss != "bce_with_logits") {
    throw SettingError("loss",
                       fmt::format("unknown loss {}: use cross_entropy, mse or bce_with_logits", options_.loss));
  }
  if (options_.batch_size < 1) throw SettingError("batch_size", "must be >= 1");
  if (options_.epochs < 0) throw SettingError("epochs", "must be >= 0");
}

at::Tensor Trainer::sameForAll(const at::Tensor& images) const {
  if (shared_input_) return images;
  std::vector<int64_t> sizes{array_size_};
  sizes.insert(sizes.end(), images.sizes().begin(), images.sizes().end());
  return images.unsqueeze(0).expand(sizes);  // B views of one batch, no copy
}

at::Tensor Trainer::memberLosses(const at::Tensor& outputs, const at::Tensor& labels, int64_t classes) const {
  if (outputs.dim() != 3 || outputs.size(0) != array_size_ || outputs.size(2) != classes) {
    throw UserError(fmt::format("the fused module returns [{}], but training needs [B={}, N, classes={}] per batch",
                                fmt::join(outputs.sizes(), ", "), array_size_, classes));
  }
  const auto flat_out = outputs.flatten(0, 1);
  const auto flat_labels = labels.flatten();
  at::Tensor per_sample;
  if (options_.loss == "cross_entropy") {
    per_sample = at::cross_entropy_loss(flat_out, flat_labels, {}, at::Reduction::None);
  } else {
    const auto target = at::one_hot(flat_labels, classes).to(outputs.dtype());
    per_sample = options_.loss == "mse"
                     ? (flat_out - target).pow(2).mean(1)
                     : at::binary_cross_entropy_with_logits(flat_out, target, {}, {}, at::Reduction::None).mean(1);
  }
  return per_sample.view({array_size_, -1}).mean(1);
}

at::Tensor Trainer::forward(const at::Tensor& input, const Dataset& data) {
  c10::IValue output;
  try {
    output = module_.forward({input});
  } catch (const std::exception& fused_error) {  // c10::Error, or torch::jit::JITException from TorchScript code
    // Member 0 alone on its batch says what is wrong in the user's terms; if
    // it runs, the fused module failed where the member did not: a bug of
    // hfta's, not the user's.
    const auto member_input = shared_input_ ? input : input[0];
    try {
      torch::NoGradGuard no_grad;
      split(module_, 0).forward({member_input});
    } catch (const std::exception& member_error) {
      throw UserError(
          fmt::format("the model cannot run on the {} data (batches of [{}] {}): {}. Train a model "
                      "built for this data's shape",
                      data.name, fmt::join(member_input.sizes(), ", "), c10::toString(member_input.scalar_type()),
                      errorSummary(member_error)));
    }
    throw;
  }
  if (!output.isTensor()) {
    throw UserError(fmt::format("the model returns a {}, but training needs one tensor of outputs [B, N, classes]",
                                output.type()->annotation_str()));
  }
  return output.toTensor();
}

void Trainer::restore(Progress progress) {
  if (static_cast<int64_t>(progress.loss_sum.size()) != array_size_ ||
      static_cast<int64_t>(progress.diverged.size()) != array_size_) {
    throw UserError(fmt::format("the checkpoint is for another number of members than {}", array_size_));
  }
  progress_ = std::move(progress);
}

std::vector<MemberEpoch> Trainer::runEpoch(const Dataset& train, const Dataset& heldout,
                                           const BetweenBatches& between) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int64_t epoch = progress_.epochs_done + 1;
  auto lr = optimizer_.lr().expanded(array_size_);  // the rate of the epoch's last batch
  module_.train();
  // Each epoch's order comes from (seed, epoch): a resumed run sees the
  // same batches as an uninterrupted one.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(options_.seed * 1000003 + epoch);
  const int64_t n = train.size();
  std::vector<at::Tensor> orders;
  for (int64_t b = 0; b < (options_.same_batches ? 1 : array_size_); ++b) orders.push_back(at::randperm(n, gen));
  const int64_t batches = (n + options_.batch_size - 1) / options_.batch_size;
  for (int64_t batch = progress_.batches_done; batch < batches; ++batch) {
    if (between && between(batch, batches)) return {};
    const int64_t begin = batch * options_.batch_size, end = std::min(n, begin + options_.batch_size);
    at::Tensor images, labels;
    if (options_.same_batches) {
      const auto index = orders[0].slice(0, begin, end);
      images = train.images.index_select(0, index);
      labels = train.labels.index_select(0, index).unsqueeze(0).expand({array_size_, end - begin});
    } else {
      std::vector<at::Tensor> xs, ys;
      for (const auto& order : orders) {
        const auto index = order.slice(0, begin, end);
        xs.push_back(train.images.index_select(0, index));
        ys.push_back(train.labels.index_select(0, index));
      }
      images = at::stack(xs);
      labels = at::stack(ys);
    }
    optimizer_.zero_grad();
    // Own streams are stacked [B, N, ...] already.
    const auto outputs = forward(options_.same_batches ? sameForAll(images) : images, train);
    const auto losses = memberLosses(outputs, labels, train.classes);
    losses.sum().backward();
    const auto detached = losses.detach().to(at::kDouble);
    for (int64_t b = 0; b < array_size_; ++b) {
      const double loss = detached[b].item<double>();
      if (!progress_.diverged[b] && !std::isfinite(loss)) {
        progress_.diverged[b] = true;
        optimizer_.freeze(b);
      }
      progress_.loss_sum[b] += loss;
    }
    lr = optimizer_.lr().expanded(array_size_);
    optimizer_.step();
    if (schedule_ != nullptr) schedule_->afterBatch();
    progress_.batches_done = batch + 1;
  }
  const auto [heldout_loss, heldout_accuracy] = evaluate(heldout);
  if (schedule_ != nullptr) schedule_->afterEpoch(heldout_loss);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<MemberEpoch> rows;
  for (int64_t b = 0; b < array_size_; ++b) {
    rows.push_back({epoch, b, progress_.loss_sum[b] / std::max<int64_t>(batches, 1), heldout_loss[b],
                    heldout_accuracy[b], lr[b], seconds, progress_.diverged[b]});
  }
  progress_.epochs_done = epoch;
  progress_.batches_done = 0;
  progress_.loss_sum.assign(array_size_, 0.0);
  return rows;
}

std::pair<std::vector<double>, std::vector<double>> Trainer::evaluate(const Dataset& heldout) {
  torch::NoGradGuard no_grad;
  module_.eval();
  auto loss_sum = at::zeros({array_size_}, at::kDouble);
  auto correct = at::zeros({array_size_}, at::kDouble);
  const int64_t n = heldout.size();
  for (int64_t begin = 0; begin < n; begin += options_.batch_size) {
    const int64_t end = std::min(n, begin + options_.batch_size);
    const auto images = heldout.images.slice(0, begin, end);
    const auto labels = heldout.labels.slice(0, begin, end).unsqueeze(0).expand({array_size_, end - begin});
    const auto outputs = forward(sameForAll(images), heldout);
    loss_sum += memberLosses(outputs, labels, heldout.classes).to(at::kDouble) * (end - begin);
    correct += outputs.argmax(2).eq(labels).sum(1).to(at::kDouble);
  }
  module_.train();
  std::vector<double> loss(array_size_), accuracy(array_size_);
  for (int64_t b = 0; b < array_size_; ++b) {
    loss[b] = loss_sum[b].item<double>() / std::max<int64_t>(n, 1);
    accuracy[b] = correct[b].item<double>() / std::max<int64_t>(n, 1);
  }
  return {loss, accuracy};
}

}  // namespace hfta::train
