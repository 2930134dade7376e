#pragma once
// Trains a fused array of B members on one data set: each member's loss is
// computed on its own outputs and the losses are summed, so each member's
// gradient is its own; one fused optimizer step updates all. Per epoch and
// member: training loss, held-out loss and accuracy, learning rate, time.
// A member whose loss stops being finite is reported and frozen; the others
// train on. Data parallel (TrainOptions::group), every rank trains the same
// array on its share of every batch and takes the step one process would
// take on the whole batch.
#include <torch/script.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/gradient_sum.h"
#include "runtime/ops/sync_batch_norm.h"
#include "runtime/optim/grad_scaler.h"
#include "runtime/optim/optimizer.h"
#include "train/dataset.h"
#include "train/schedule.h"

namespace hfta::train {

struct TrainOptions {
  int64_t epochs = 5;
  int64_t batch_size = 64;
  uint64_t seed = 0;
  // Every member sees the same batches (the usual sweep), or each member
  // its own shuffled stream.
  bool same_batches = true;
  // Or "mse" / "bce_with_logits", both on one-hot targets.
  std::string loss = "cross_entropy";
  // The dtype of the module's floating-point tensors and of the images.
  at::ScalarType dtype = at::kFloat;
  // Where the module and each batch run.
  c10::Device device = at::kCPU;
  // Mixed precision: the forward under autocast in this dtype (bfloat16 or
  // float16; none if unset), the parameters and optimizer state staying in
  // `dtype`. float16 scales each member's loss with its own scale
  // (optim::FusedGradScaler): an overflow skips that member's step only.
  std::optional<at::ScalarType> amp;
  // TorchScript's profiling executor (PyTorch's default: it profiles the
  // graph and builds differentiable subgraphs with JIT autodiff), or, by
  // default, the graph run as it is with eager autograd: as fast or faster
  // for fused graphs (MLP 1.3x, LeNet 1.15x on 2 cores; bench/README.md).
  // Per thread, set around each forward.
  bool profiling_executor = false;
  // Data parallel (hfta-train under torchrun): the ranks this process trains
  // with, or none (not owned). Each rank takes a near-equal share of every
  // batch; each member's loss is its sum over all ranks' samples divided by
  // their count, and gradients are summed over ranks, so every rank takes
  // the step one process would take on the whole batch. Losses, held-out
  // metrics and a request to stop are agreed by all ranks.
  distributed::Group* group = nullptr;
  // With ranks: batch norm normalizes with the whole batch's statistics
  // (--sync-batch-norm). Without it, with each rank's shard's, and the
  // running statistics are rank 0's: each step starts from rank 0's buffers
  // (as PyTorch's DistributedDataParallel does by default).
  bool sync_batch_norm = false;
};

// Where a run is: epochs done, and inside the next epoch the batches done
// and their per-member loss sums (a run stopped between batches resumes
// there).
struct Progress {
  int64_t epochs_done = 0;
  int64_t batches_done = 0;
  std::vector<double> loss_sum;
  std::vector<bool> diverged;
  // Steps the loss scaler skipped in this epoch, per member.
  std::vector<int64_t> skipped_steps;
};

struct MemberEpoch {
  int64_t epoch = 0;  // 1-based
  int64_t member = 0;
  // lr: the rate of the epoch's last batch (OneCycleLR moves it every batch).
  // seconds: the whole epoch; train_seconds: its training steps only (what
  // HFTA's examples time), without the held-out evaluation.
  double train_loss = 0, heldout_loss = 0, heldout_accuracy = 0, lr = 0, seconds = 0;
  bool diverged = false;
  double train_seconds = 0;
  // With loss scaling: the steps the member skipped (a gradient overflowed)
  // and its scale at the epoch's end; 0 without.
  int64_t skipped_steps = 0;
  double loss_scale = 0;
};

// Per member, on a whole data set: top-1 and top-5 accuracy and the mean loss.
struct MemberEvaluation {
  int64_t member = 0;
  double top1 = 0, top5 = 0, loss = 0;
};

class Trainer {
 public:
  // `fused`: a module written by hfta-fuse; `optimizer` over its parameters.
  Trainer(torch::jit::Module fused, optim::FusedOptimizer& optimizer, TrainOptions options);

  // The learning-rate schedule (optional).
  void setSchedule(Schedule* schedule) { schedule_ = schedule; }
  // Called before each batch with the batches done and in all; returning
  // true stops the epoch there.
  using BetweenBatches = std::function<bool(int64_t done, int64_t total)>;
  // (The rest of) the next epoch over `train`, then the held-out
  // evaluation: B rows. If `between` says stop, returns no rows and
  // progress() says where it stopped.
  std::vector<MemberEpoch> runEpoch(const Dataset& train, const Dataset& heldout, const BetweenBatches& between = {});
  const Progress& progress() const { return progress_; }
  // Continues a run from a checkpoint's progress (B entries each).
  void restore(Progress progress);
  // Held-out loss and accuracy per member, in eval mode.
  std::pair<std::vector<double>, std::vector<double>> evaluate(const Dataset& heldout);
  // Loss, top-1 and top-5 accuracy per member (HFTA's --eval), in eval mode.
  std::vector<MemberEvaluation> evaluateTopK(const Dataset& data);
  // The per-member loss scaler (float16 autocast), or nullptr.
  optim::FusedGradScaler* scaler() { return scaler_.get(); }

  // Data parallel: the seconds this rank has spent in sums and broadcasts
  // across ranks (waiting for the slowest rank included; of the gradients'
  // sums, which run during the backward pass, the wait after it).
  double communicationSeconds() const { return communication_seconds_; }

  int64_t arraySize() const { return array_size_; }
  torch::jit::Module& module() { return module_; }

 private:
  // One batch [N, ...] that every member sees, as the fused module takes
  // it: B views [B, N, ...] (or the batch itself, for a module fused with a
  // shared input).
  at::Tensor sameForAll(const at::Tensor& images) const;
  // Per member [B]: the sum of the losses of outputs [B, N, (L,) K] against
  // targets [B, N, (L)], and how many samples (or positions with a target)
  // they sum over.
  std::pair<at::Tensor, at::Tensor> memberLossSums(const at::Tensor& outputs, const at::Tensor& targets,
                                                   int64_t classes) const;
  // The module's outputs for `input` (under autocast if asked); UserError if
  // the model cannot run on the data (an input shape it was not built for).
  at::Tensor forward(const at::Tensor& input, const Dataset& data);
  // Per member over `data` in eval mode: the loss sum, correct top-1 and
  // top-5 predictions, and the count (samples or positions with a target).
  struct Tally {
    at::Tensor loss_sum, top1, top5, counted;
  };
  Tally tally(const Dataset& data);
  // This rank's part of a batch of n samples: positions [begin, end) of the
  // ranks' near-equal shares. A rank left without a sample (n < ranks)
  // computes sample 0 as a stand-in that weighs nothing: it still takes
  // part in every sum over ranks.
  struct Share {
    int64_t begin = 0, end = 0;
    bool stand_in = false;
  };
  Share shareOf(int64_t n) const;
  // Sums `tensors` over the ranks, in place (by way of the run's device,
  // where NCCL needs them).
  void sumOverRanks(const std::vector<at::Tensor>& tensors);
  // Per-shard batch norm: every rank's buffers become rank 0's.
  void shareRankZeroBuffers();
  // A collective that failed inside the graph (synchronized batch norm's
  // sums, in the forward or the backward) comes out wrapped in TorchScript's
  // or autograd's errors: this throws it again as the CollectiveError it was.
  void rethrowFailedCollective() const;

  torch::jit::Module module_;
  optim::FusedOptimizer& optimizer_;
  Schedule* schedule_ = nullptr;
  TrainOptions options_;
  int64_t array_size_;
  bool shared_input_;
  Progress progress_;
  std::unique_ptr<optim::FusedGradScaler> scaler_;
  std::unique_ptr<ops::SyncBatchNormScope> sync_batch_norm_;
  std::unique_ptr<distributed::OverlappedGradientSum> gradient_sum_;  // data parallel
  // Data parallel: a rank asked to stop during the last batch (every rank
  // learns it from that batch's sum of losses); the next batch does not run.
  bool stop_agreed_ = false;
  double communication_seconds_ = 0;
  std::string failed_collective_;  // what rethrowFailedCollective() throws
};

}  // namespace hfta::train
