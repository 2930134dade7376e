// Synchronized batch norm (runtime/ops/sync_batch_norm.h) on two "ranks" that
// are two threads of this process, each with its shard of one batch,
// against hfta::batch_norm on the whole batch in one piece: outputs, input
// and weight gradients, running statistics. In float64: the two differ
// only in the order of their sums (shard by shard, then across ranks), a
// few units of 1e-16 relative, far inside the tolerance of 1e-12.
#include "runtime/ops/sync_batch_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/ops/ops.h"
#include "tests/test_support.h"

namespace hfta::ops {
namespace {

using testing::allClose;

constexpr double kTolerance = 1e-12;
constexpr int64_t kMembers = 2, kChannels = 3;

// The sum over two threads: each deposits its tensor, both leave with the
// sum (a + b == b + a exactly, so arrival order does not matter).
class TwoThreadSum {
 public:
  void operator()(at::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    parts_.push_back(t.clone());
    if (parts_.size() == 2) {
      sum_ = parts_[0] + parts_[1];
      parts_.clear();
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    t.copy_(sum_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<at::Tensor> parts_;
  at::Tensor sum_;
  int64_t round_ = 0;
};

struct Result {
  at::Tensor output, input_grad, weight_grad, bias_grad, running_mean, running_var;
};

// The weights and running statistics every rank starts from (drawn here,
// once: the threads must not share the global generator).
struct State {
  at::Tensor weight, bias, running_mean, running_var;
};

State startingState() {
  const auto options = torch::dtype(torch::kDouble);
  const auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  return {1 + torch::rand({kMembers, kChannels}, gen, options), torch::randn({kMembers, kChannels}, gen, options),
          torch::randn({kMembers, kChannels}, gen, options), 1 + torch::rand({kMembers, kChannels}, gen, options)};
}

// Batch norm of `input` [N, B*C, *] for an array of kMembers from `start`,
// with the momenta given (one: hfta::batch_norm; several:
// hfta::batch_norm_momenta), and the backward of a fixed weighting of the
// output.
Result normalize(const State& start, const at::Tensor& input, const std::vector<double>& momenta,
                 const at::Tensor& output_weights) {
  auto weight = start.weight.clone().requires_grad_();
  auto bias = start.bias.clone().requires_grad_();
  auto running_mean = start.running_mean.clone(), running_var = start.running_var.clone();
  auto x = input.clone().requires_grad_();
  const auto y = momenta.size() == 1
                     ? ops::batch_norm(x, weight, bias, running_mean, running_var, true, momenta[0], 1e-5, false)
                     : ops::batch_norm_momenta(x, weight, bias, running_mean, running_var, true, momenta, 1e-5, false);
  (y * output_weights).sum().backward();
  return {y.detach(), x.grad(), weight.grad(), bias.grad(), running_mean, running_var};
}

// The whole batch in one process, and split at `split` over two threads
// under a SyncBatchNormScope; every result equal. With `split` equal to the
// batch's size, the second rank has no sample and normalizes sample 0 as a
// stand-in that counts for nothing (its output is not compared and weighs 0
// in the loss, as the trainer weighs it).
void expectShardsEqualWhole(const std::vector<int64_t>& shape, int64_t split, const std::vector<double>& momenta) {
  torch::manual_seed(0);
  const auto input = 3 + 2 * torch::randn(shape, torch::kDouble);
  const auto output_weights = torch::randn(shape, torch::kDouble);
  const auto start = startingState();
  const auto whole = normalize(start, input, momenta, output_weights);

  Result shards[2];
  {
    TwoThreadSum sum;
    const SyncBatchNormScope scope([&](at::Tensor& t) { sum(t); });
    const bool stand_in = split == shape[0];
    std::thread second([&] {
      setStandInShard(stand_in);
      const int64_t begin = stand_in ? 0 : split, end = stand_in ? 1 : shape[0];
      shards[1] =
          normalize(start, input.slice(0, begin, end), momenta,
                    stand_in ? at::zeros_like(output_weights.slice(0, 0, 1)) : output_weights.slice(0, begin, end));
      setStandInShard(false);
      if (stand_in) shards[1].output = shards[1].input_grad = input.slice(0, 0, 0);
    });
    shards[0] = normalize(start, input.slice(0, 0, split), momenta, output_weights.slice(0, 0, split));
    second.join();
  }
  EXPECT_TRUE(allClose(at::cat({shards[0].output, shards[1].output}), whole.output, kTolerance));
  EXPECT_TRUE(allClose(at::cat({shards[0].input_grad, shards[1].input_grad}), whole.input_grad, kTolerance));
  for (const auto& shard : shards) {
    // Each rank's weight gradient is its shard's part; their sum (what the
    // trainer's all-reduce makes) is the whole batch's.
    EXPECT_TRUE(allClose(shard.running_mean, whole.running_mean, kTolerance));
    EXPECT_TRUE(allClose(shard.running_var, whole.running_var, kTolerance));
  }
  EXPECT_TRUE(allClose(shards[0].weight_grad + shards[1].weight_grad, whole.weight_grad, kTolerance));
  EXPECT_TRUE(allClose(shards[0].bias_grad + shards[1].bias_grad, whole.bias_grad, kTolerance));
}

TEST(SyncBatchNorm, ShardsOnTwoRanksEqualTheWholeBatch2d) {
  expectShardsEqualWhole({8, kMembers * kChannels, 4, 5}, 5, {0.1});
}

TEST(SyncBatchNorm, ShardsOfUnequalSizeWithOwnMomentaPerMember1d) {
  expectShardsEqualWhole({7, kMembers * kChannels, 6}, 2, {0.1, 0.3});
}

TEST(SyncBatchNorm, ARankWithNoSamplesStillTakesPart) { expectShardsEqualWhole({4, kMembers * kChannels}, 4, {0.2}); }

TEST(SyncBatchNorm, OffWithoutAScope) {
  EXPECT_FALSE(batchNormSynchronized());
  {
    const SyncBatchNormScope scope([](at::Tensor&) {});
    EXPECT_TRUE(batchNormSynchronized());
  }
  EXPECT_FALSE(batchNormSynchronized());
}

}  // namespace
}  // namespace hfta::ops
