#pragma once
// Synchronized batch norm, for data-parallel training (hfta-train
// --sync-batch-norm): while a SyncBatchNormScope lives, hfta::batch_norm
// and hfta::batch_norm_momenta in training mode normalize with the mean and
// variance of the global batch (every rank's shard together) and update the
// running statistics with them, as one process training on the whole batch
// would; gradients flow back through the sums across ranks. Without a scope
// (one process, or per-shard statistics) they are at::batch_norm.
#include <ATen/ATen.h>

#include <functional>
#include <optional>

namespace hfta::ops {

// Sums a tensor over the ranks in place; every rank calls it in the same
// order with tensors of the same shape.
using CrossRankSum = std::function<void(at::Tensor&)>;

class SyncBatchNormScope {
 public:
  explicit SyncBatchNormScope(CrossRankSum sum);
  ~SyncBatchNormScope();
  SyncBatchNormScope(const SyncBatchNormScope&) = delete;
  SyncBatchNormScope& operator=(const SyncBatchNormScope&) = delete;
};

// Whether a scope is alive.
bool batchNormSynchronized();
// While true, this rank's input is a stand-in (the batch had fewer samples
// than there are ranks, and this rank got none): it takes part in the sums
// with zeros, its sample counting for nothing.
void setStandInShard(bool stand_in);

// Batch norm in training mode over the global batch: input [N, C, *] (this
// rank's N samples, possibly none), weight and bias [C], running
// statistics [C] updated in place with the per-channel `momentum` [C].
at::Tensor syncBatchNorm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                         const std::optional<at::Tensor>& running_var, const at::Tensor& momentum, double eps);

}  // namespace hfta::ops
