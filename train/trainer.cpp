#include "train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <chrono>
#include <cmath>

#include "distributed/gradient_sum.h"
#include "distributed/world.h"
#include "hfta/io.h"
#include "io/tensor_slots.h"
#include "runtime/ops/autocast.h"
#include "runtime/ops/ops.h"
#include "support/error_summary.h"
#include "train/setting_error.h"
#include "train/text_data.h"

namespace hfta::train {

namespace {

// Adds the seconds of its scope to `total`.
class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

Trainer::Trainer(torch::jit::Module fused, optim::FusedOptimizer& optimizer, TrainOptions options)
    : module_(std::move(fused)),
      optimizer_(optimizer),
      options_(std::move(options)),
      array_size_(hfta::arraySize(module_)),
      shared_input_(hfta::sharedInput(module_)) {
  progress_.loss_sum.assign(array_size_, 0.0);
  progress_.diverged.assign(array_size_, false);
  progress_.skipped_steps.assign(array_size_, 0);
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
  if (options_.amp) {
    if (*options_.amp != at::kBFloat16 && *options_.amp != at::kHalf) {
      throw SettingError("amp_dtype", "is bfloat16 or float16");
    }
    if (options_.dtype != at::kFloat) {
      throw SettingError("amp", "mixed precision trains a float32 model (its master weights); drop --dtype float64");
    }
    // float16's narrow range needs loss scaling; bfloat16 has float32's.
    if (*options_.amp == at::kHalf) scaler_ = std::make_unique<optim::FusedGradScaler>(array_size_);
  }
  if (options_.sync_batch_norm) {
    if (options_.group == nullptr) {
      throw SettingError("sync_batch_norm",
                         "synchronizes batch norm over the ranks of a data-parallel run, and this run is one "
                         "process: run it under torchrun (docs/distributed.md)");
    }
    sync_batch_norm_ = std::make_unique<ops::SyncBatchNormScope>([this](at::Tensor& t) {
      const Stopwatch stopwatch(communication_seconds_);
      try {
        options_.group->sumInPlace({t});
      } catch (const distributed::CollectiveError& e) {
        failed_collective_ = e.what();  // TorchScript and autograd wrap it in errors of their own
        throw;
      }
    });
  }
  if (options_.group != nullptr) {
    // Every rank starts from rank 0's weights and buffers.
    std::vector<at::Tensor> state, trained;
    // Each tied tensor once: summed twice, its gradient would double.
    for (const auto& p : distinctParameters(module_)) {
      state.push_back(p.detach());
      if (p.requires_grad()) trained.push_back(p);
    }
    for (const auto& b : distinctBuffers(module_)) state.push_back(b);
    options_.group->broadcastInPlace(state);
    gradient_sum_ = std::make_unique<distributed::OverlappedGradientSum>(*options_.group, trained);
  }
}

Trainer::Share Trainer::shareOf(int64_t n) const {
  if (options_.group == nullptr) return {0, n, false};
  const int64_t ranks = options_.group->size(), rank = options_.group->rank();
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t begin = rank * base + std::min(rank, extra), size = base + (rank < extra ? 1 : 0);
  if (size == 0) return {0, 1, true};
  return {begin, begin + size, false};
}

void Trainer::sumOverRanks(const std::vector<at::Tensor>& tensors) {
  const Stopwatch stopwatch(communication_seconds_);
  std::vector<at::Tensor> on_device;
  for (const auto& t : tensors) on_device.push_back(t.to(options_.device));
  options_.group->sumInPlace(on_device);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!on_device[i].is_same(tensors[i])) tensors[i].copy_(on_device[i]);
  }
}

void Trainer::rethrowFailedCollective() const {
  if (!failed_collective_.empty()) throw distributed::CollectiveError(failed_collective_);
}

void Trainer::shareRankZeroBuffers() {
  const Stopwatch stopwatch(communication_seconds_);
  const auto buffers = distinctBuffers(module_);
  if (!buffers.empty()) options_.group->broadcastInPlace(buffers);
}

at::Tensor Trainer::sameForAll(const at::Tensor& images) const {
  return shared_input_ ? images : ops::broadcast_to_members(images, array_size_);  // B views, no copy
}

std::pair<at::Tensor, at::Tensor> Trainer::memberLossSums(const at::Tensor& outputs, const at::Tensor& targets,
                                                          int64_t classes) const {
  // Classification: outputs [B, N, classes], targets [B, N]. Per position
  // (text): outputs [B, N, L, vocabulary], targets [B, N, L].
  const bool per_position = targets.dim() == 3;
  const bool shaped = outputs.dim() == targets.dim() + 1 && outputs.size(0) == array_size_ &&
                      outputs.size(-1) == classes &&
                      outputs.sizes().slice(1, targets.dim() - 1) == targets.sizes().slice(1);
  if (!shaped) {
    throw UserError(fmt::format(
        "the fused module returns [{}], but training on this data needs [B={}, {}={}] per batch{}",
        fmt::join(outputs.sizes(), ", "), array_size_,
        per_position ? fmt::format("N={}, L={}, vocabulary", targets.size(1), targets.size(2))
                     : fmt::format("N={}, classes", targets.size(1)),
        classes, per_position ? " (build the model with the data's vocabulary size, which hfta-train prints)" : ""));
  }
  if (per_position && options_.loss != "cross_entropy") {
    throw SettingError("loss", fmt::format("text data trains with cross_entropy, not {}", options_.loss));
  }
  // The loss in float32 from autocast's lower-precision outputs.
  const auto flat_out =
      (at::isReducedFloatingType(outputs.scalar_type()) ? outputs.to(at::kFloat) : outputs).reshape({-1, classes});
  const auto flat_targets = targets.reshape({-1});
  at::Tensor per_sample;
  if (options_.loss == "cross_entropy") {
    per_sample = at::cross_entropy_loss(flat_out, flat_targets, {}, at::Reduction::None, kIgnoreIndex);
  } else {
    const auto target = at::one_hot(flat_targets, classes).to(outputs.dtype());
    per_sample = options_.loss == "mse"
                     ? (flat_out - target).pow(2).mean(1)
                     : at::binary_cross_entropy_with_logits(flat_out, target, {}, {}, at::Reduction::None).mean(1);
  }
  // The count in the loss's dtype: autocast's bfloat16 outputs would round
  // a count above 256.
  const auto counted = targets.ne(kIgnoreIndex).reshape({array_size_, -1}).sum(1).to(per_sample.scalar_type());
  return {per_sample.view({array_size_, -1}).sum(1), counted};
}

at::Tensor Trainer::forward(const at::Tensor& input, const Dataset& data) {
  c10::IValue output;
  try {
    const AutocastGuard autocast(options_.device.type(), options_.amp.value_or(at::kBFloat16),
                                 options_.amp.has_value());
    const torch::jit::GraphOptimizerEnabledGuard executor(options_.profiling_executor);
    output = module_.forward({input});
  } catch (const std::exception& fused_error) {  // c10::Error, or torch::jit::JITException from TorchScript code
    rethrowFailedCollective();
    // Member 0 alone on its batch says what is wrong in the user's terms; if
    // it runs, the fused module failed where the member did not: a bug of
    // hfta's, not the user's.
    const auto member_input = shared_input_ ? input : input[0];
    try {
      torch::NoGradGuard no_grad;
      split(module_, 0).forward({member_input});
    } catch (const std::exception& member_error) {
      const std::string fix =
          member_input.is_floating_point()
              ? "Train a model built for this data's shape"
              : fmt::format(
                    "Train a model built for this data: token ids up to {} (build the model with the data's "
                    "vocabulary size, {}: examples/text.py --vocab-from DATA_DIR)",
                    data.classes - 1, data.classes);
      throw UserError(fmt::format("the model cannot run on the {} data (batches of [{}] {}): {}. {}", data.name,
                                  fmt::join(member_input.sizes(), ", "), c10::toString(member_input.scalar_type()),
                                  errorSummary(member_error), fix));
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
  if (progress.skipped_steps.empty()) progress.skipped_steps.assign(array_size_, 0);
  if (static_cast<int64_t>(progress.loss_sum.size()) != array_size_ ||
      static_cast<int64_t>(progress.diverged.size()) != array_size_ ||
      static_cast<int64_t>(progress.skipped_steps.size()) != array_size_) {
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
    const bool asked_to_stop = between && between(batch, batches);
    if (options_.group == nullptr ? asked_to_stop : stop_agreed_) {
      stop_agreed_ = false;
      return {};
    }
    const int64_t begin = batch * options_.batch_size, end = std::min(n, begin + options_.batch_size);
    const auto share = shareOf(end - begin);
    auto mine = [&](const at::Tensor& order) { return order.slice(0, begin + share.begin, begin + share.end); };
    at::Tensor images, labels;
    if (options_.same_batches) {
      const auto index = mine(orders[0]);
      images = train.inputs.index_select(0, index);
      labels = ops::broadcast_to_members(train.targets.index_select(0, index), array_size_);
    } else {
      std::vector<at::Tensor> xs, ys;
      for (const auto& order : orders) {
        const auto index = mine(order);
        xs.push_back(train.inputs.index_select(0, index));
        ys.push_back(train.targets.index_select(0, index));
      }
      images = at::stack(xs);
      labels = at::stack(ys);
    }
    images = images.to(options_.device);
    labels = labels.to(options_.device);
    if (options_.group != nullptr && !sync_batch_norm_) shareRankZeroBuffers();
    ops::setStandInShard(share.stand_in);
    optimizer_.zero_grad();
    // Own streams are stacked [B, N, ...] already.
    const auto outputs = forward(options_.same_batches ? sameForAll(images) : images, train);
    auto [sums, counts] = memberLossSums(outputs, labels, train.classes);
    if (share.stand_in) {
      sums = sums * 0;
      counts = at::zeros_like(counts);
    }
    // Each member's loss over the whole batch: its sums and counts over all
    // ranks (and with them, whether a rank asked to stop).
    auto batch_sums = sums.detach(), batch_counts = counts;
    if (options_.group != nullptr) {
      const auto packed = at::cat({batch_sums, batch_counts, at::full({1}, asked_to_stop ? 1 : 0, counts.options())});
      sumOverRanks({packed});
      batch_sums = packed.narrow(0, 0, array_size_);
      batch_counts = packed.narrow(0, array_size_, array_size_);
      stop_agreed_ = packed[2 * array_size_].item<double>() > 0;
    }
    const auto losses = sums / batch_counts.clamp_min(1);
    // Data parallel: the gradients' sums over the ranks start during the
    // backward pass; finish() waits for the last.
    if (gradient_sum_) gradient_sum_->begin();
    try {
      (scaler_ ? scaler_->scale(losses) : losses).sum().backward();
    } catch (const std::exception&) {
      rethrowFailedCollective();
      throw;
    }
    if (gradient_sum_) {
      const Stopwatch stopwatch(communication_seconds_);
      gradient_sum_->finish();
    }
    const auto detached = (batch_sums / batch_counts.clamp_min(1)).to(at::kDouble).cpu();
    for (int64_t b = 0; b < array_size_; ++b) {
      const double loss = detached[b].item<double>();
      // With loss scaling a non-finite loss is the scaler's to handle: it
      // skips that member's step, as torch.amp.GradScaler would alone.
      if (!scaler_ && !progress_.diverged[b] && !std::isfinite(loss)) {
        progress_.diverged[b] = true;
        optimizer_.freeze(b);
      }
      progress_.loss_sum[b] += loss;
    }
    lr = optimizer_.lr().expanded(array_size_);
    if (scaler_) {
      const auto skipped = scaler_->step(optimizer_);
      scaler_->update();
      for (int64_t b = 0; b < array_size_; ++b) progress_.skipped_steps[b] += skipped[b];
    } else {
      optimizer_.step();
    }
    if (schedule_ != nullptr) schedule_->afterBatch();
    progress_.batches_done = batch + 1;
  }
  const double train_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // With loss scaling, a member whose loss was never finite in a whole
  // epoch (every step skipped: its forward itself overflows, or its
  // weights are gone) has diverged; freezing it changes nothing but saves
  // the work, as without scaling.
  for (int64_t b = 0; scaler_ && b < array_size_; ++b) {
    const bool never_finite = progress_.skipped_steps[b] == batches && !std::isfinite(progress_.loss_sum[b]);
    if (!progress_.diverged[b] && never_finite) {
      progress_.diverged[b] = true;
      optimizer_.freeze(b);
    }
  }
  const auto [heldout_loss, heldout_accuracy] = evaluate(heldout);
  if (schedule_ != nullptr) schedule_->afterEpoch(heldout_loss);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto scales = scaler_ ? scaler_->scales() : std::vector<double>(array_size_, 0.0);
  std::vector<MemberEpoch> rows;
  for (int64_t b = 0; b < array_size_; ++b) {
    rows.push_back({epoch, b, progress_.loss_sum[b] / std::max<int64_t>(batches, 1), heldout_loss[b],
                    heldout_accuracy[b], lr[b], seconds, progress_.diverged[b], train_seconds,
                    progress_.skipped_steps[b], scales[b]});
  }
  progress_.epochs_done = epoch;
  progress_.batches_done = 0;
  progress_.loss_sum.assign(array_size_, 0.0);
  progress_.skipped_steps.assign(array_size_, 0);
  return rows;
}

Trainer::Tally Trainer::tally(const Dataset& data) {
  torch::NoGradGuard no_grad;
  module_.eval();
  if (options_.group != nullptr && !sync_batch_norm_) shareRankZeroBuffers();
  const auto zeros = [&] { return at::zeros({array_size_}, at::kDouble); };
  Tally t{zeros(), zeros(), zeros(), zeros()};
  const int64_t n = data.size();
  for (int64_t begin = 0; begin < n; begin += options_.batch_size) {
    // This rank's share of each batch; the ranks' tallies are summed below.
    const auto share = shareOf(std::min(n, begin + options_.batch_size) - begin);
    const int64_t from = begin + share.begin, to = begin + share.end;
    const auto images = data.inputs.slice(0, from, to).to(options_.device);
    const auto labels = ops::broadcast_to_members(data.targets.slice(0, from, to), array_size_).to(options_.device);
    ops::setStandInShard(share.stand_in);
    const auto outputs = forward(sameForAll(images), data);
    if (share.stand_in) continue;
    const auto [sums, counts] = memberLossSums(outputs, labels, data.classes);
    t.loss_sum += sums.to(at::kDouble).cpu();
    t.counted += counts.to(at::kDouble).cpu();
    auto per_member = [&](const at::Tensor& hits) {
      return hits.reshape({array_size_, -1}).sum(1).to(at::kDouble).cpu();
    };
    t.top1 += per_member(outputs.argmax(-1).eq(labels));
    const auto top = std::get<1>(outputs.topk(std::min<int64_t>(5, data.classes), -1));
    t.top5 += per_member(top.eq(labels.unsqueeze(-1)).any(-1));
  }
  module_.train();
  if (options_.group != nullptr) sumOverRanks({t.loss_sum, t.top1, t.top5, t.counted});
  t.counted.clamp_min_(1);
  return t;
}

std::pair<std::vector<double>, std::vector<double>> Trainer::evaluate(const Dataset& heldout) {
  const auto t = tally(heldout);
  std::vector<double> loss(array_size_), accuracy(array_size_);
  for (int64_t b = 0; b < array_size_; ++b) {
    loss[b] = t.loss_sum[b].item<double>() / t.counted[b].item<double>();
    accuracy[b] = t.top1[b].item<double>() / t.counted[b].item<double>();
  }
  return {loss, accuracy};
}

std::vector<MemberEvaluation> Trainer::evaluateTopK(const Dataset& data) {
  const auto t = tally(data);
  std::vector<MemberEvaluation> evaluations;
  for (int64_t b = 0; b < array_size_; ++b) {
    const double count = t.counted[b].item<double>();
    evaluations.push_back(
        {b, t.top1[b].item<double>() / count, t.top5[b].item<double>() / count, t.loss_sum[b].item<double>() / count});
  }
  return evaluations;
}

}  // namespace hfta::train
