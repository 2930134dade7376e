#include "runtime/ops/sync_batch_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include <memory>

namespace hfta::ops {
namespace {

// The sum the live scope installed (one run trains at a time in a process).
std::shared_ptr<const CrossRankSum>& installedSum() {
  static std::shared_ptr<const CrossRankSum> sum;
  return sum;
}

// Per thread: the forward that reads it runs on the thread that set it
// (and the tests run two ranks as two threads).
bool& standIn() {
  thread_local bool stand_in = false;
  return stand_in;
}

// y = sum over ranks of x. Every rank's y depends on every rank's x, so the
// gradient of x is the sum over ranks of y's gradients.
struct SumOverRanks : torch::autograd::Function<SumOverRanks> {
  static at::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const at::Tensor& x) {
    auto y = x.clone();
    (*installedSum())(y);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(installedSum(), "hfta: a synchronized batch norm's backward ran after its SyncBatchNormScope ended");
    auto grad = grads[0].clone();
    (*installedSum())(grad);
    return {grad};
  }
};

}  // namespace

SyncBatchNormScope::SyncBatchNormScope(CrossRankSum sum) {
  TORCH_CHECK(!installedSum(), "hfta: a SyncBatchNormScope is already alive");
  installedSum() = std::make_shared<const CrossRankSum>(std::move(sum));
}

SyncBatchNormScope::~SyncBatchNormScope() {
  installedSum().reset();
  standIn() = false;
}

bool batchNormSynchronized() { return installedSum() != nullptr; }

void setStandInShard(bool stand_in) { standIn() = stand_in; }

at::Tensor syncBatchNorm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                         const std::optional<at::Tensor>& running_var, const at::Tensor& momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "hfta: batch norm needs an input [N, C, *], got ", input.sizes());
  const int64_t channels = input.size(1);
  std::vector<int64_t> reduced{0}, shape(input.dim(), 1);
  for (int64_t d = 2; d < input.dim(); ++d) reduced.push_back(d);
  shape[1] = channels;
  // The statistics in float32 at least, as at::batch_norm accumulates them
  // (under autocast the input may be bfloat16 or float16).
  const auto stats_type = at::promote_types(input.scalar_type(), at::kFloat);
  const auto x = input.to(stats_type);
  // Two passes, each one sum over ranks: the mean, then the squared
  // deviations from it (stable where E[x^2] - mean^2 would cancel). The
  // count travels with the first sum: shards may differ in size.
  const double share = standIn() ? 0.0 : 1.0;
  const double local_count = share * input.numel() / std::max<int64_t>(channels, 1);
  const auto sums = SumOverRanks::apply(at::cat({x.sum(reduced) * share, at::full({1}, local_count, x.options())}));
  const auto count = sums.narrow(0, channels, 1).detach();
  const auto mean = sums.narrow(0, 0, channels) / count;
  const auto centered = x - mean.view(shape);
  const auto var = SumOverRanks::apply(centered.pow(2).sum(reduced) * share) / count;
  auto y = centered * at::rsqrt(var + eps).view(shape);
  if (weight && weight->defined()) y = y * weight->view(shape);
  if (bias && bias->defined()) y = y + bias->view(shape);
  if (running_mean && running_mean->defined()) {
    at::NoGradGuard no_grad;
    const auto m = momentum.to(running_mean->options());
    const double n = count.item<double>();
    running_mean->mul_(1 - m).add_(m * mean.detach().to(running_mean->scalar_type()));
    if (running_var && running_var->defined()) {
      // The unbiased variance, as at::batch_norm keeps it.
      const auto unbiased = var.detach() * (n / std::max(n - 1, 1.0));
      running_var->mul_(1 - m).add_(m * unbiased.to(running_var->scalar_type()));
    }
  }
  return y.to(input.scalar_type());
}

}  // namespace hfta::ops
