#pragma once
// Gradients summed over the ranks while the backward pass still runs, as
// PyTorch's DistributedDataParallel does: parameters go into buckets of at
// most 25 MiB in reverse order (about the order backward produces their
// gradients); a hook on each parameter's gradient accumulator counts the
// gradients in, and a bucket whose gradients are all in starts its
// all-reduce at once, while backward goes on with earlier layers. Buckets
// start in order on every rank (collectives must be issued in the same
// order everywhere), so a bucket waits for those before it.
//
//   distributed::OverlappedGradientSum sum(group, params);
//   sum.begin();
//   loss.backward();
//   sum.finish();  // every gradient is now the sum over the ranks
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <vector>

#include "distributed/world.h"

namespace hfta::distributed {

class OverlappedGradientSum {
 public:
  OverlappedGradientSum(Group& group, std::vector<at::Tensor> params, int64_t bucket_bytes = 25 << 20);
  ~OverlappedGradientSum();
  OverlappedGradientSum(const OverlappedGradientSum&) = delete;
  OverlappedGradientSum& operator=(const OverlappedGradientSum&) = delete;

  // Before the backward pass: gradients accumulated from now on count.
  void begin();
  // After it: starts the buckets left (a parameter without a gradient
  // takes zeros), waits for every sum and puts it in the gradients.
  // CollectiveError if a rank is gone.
  void finish();
  // Buckets started so far in this pass (all of them after finish()).
  size_t started() const { return next_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    int64_t bytes = 0;
    int64_t waiting = 0;  // gradients not in yet
    at::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void arrived(size_t param);
  // Starts every bucket, in order, whose gradients are all in.
  void startReady();

  Group& group_;
  std::vector<at::Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> in_;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // the first bucket not started
  bool armed_ = false;
  // Kept alive: a parameter's accumulator, and the hook on it, last only as
  // long as someone holds it.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hooks_;
};

}  // namespace hfta::distributed
