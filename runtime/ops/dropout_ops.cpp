// Dropout on the CPU with a counter-based generator.
//
// ATen's CPU dropout draws a float mask with bernoulli_ (MKL's generator,
// then a conversion), divides it and multiplies: 8-9 ns an element on
// the EPYC here, against 0.1 ns for the multiply alone, so that a small
// Transformer's dropouts took a sixth of its training step (this one: about
// 1 ns; bench/dropout.py). Here each
// element's keep bit is a function of one 64-bit draw from the default CPU
// generator (the key, drawn per call, so a seed reproduces a run and the
// draws that follow) and of the element's index: SplitMix64 (Steele, Lea
// and Flood, OOPSLA 2014) run as a counter-based generator, whose outputs
// pass BigCrush, two elements to an output. One pass writes the output and
// a one-byte keep mask, which backward reads (ATen saves a float mask).
// The masks follow ATen's distribution, not its numbers: the members'
// masks already differ from what each member alone draws (one [B, ...]
// draw against B draws). What an element gets does not depend on the
// number of threads.
//
// CUDA and other devices, dtypes other than floating point, and p outside
// (0, 1) take at::dropout as they are.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <mutex>

#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

// Elements per task of at::parallel_for.
constexpr int64_t kGrain = 32768;

// The n-th output of the SplitMix64 sequence that starts at `key`.
inline uint64_t splitMix64(uint64_t key, uint64_t n) {
  uint64_t z = key + (n + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t drawKey() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// y = x * scale where kept, 0 elsewhere; keep[i] says which. Element i
// is kept when its 32 bits, read as an integer, fall below `threshold`
// (P = threshold / 2^32, the keep probability to within 2^-32).
template <typename scalar_t>
void dropOut(const scalar_t* x, scalar_t* y, bool* keep, int64_t n, uint64_t key, uint64_t threshold, double scale) {
  using opmath_t = at::opmath_type<scalar_t>;
  const auto s = static_cast<opmath_t>(scale);
  auto one = [&](int64_t i, uint64_t bits) {
    const bool kept = (bits & 0xffffffffULL) < threshold;
    keep[i] = kept;
    y[i] = static_cast<scalar_t>(static_cast<opmath_t>(x[i]) * (kept ? s : opmath_t(0)));
  };
  at::parallel_for(0, n / 2, kGrain / 2, [&](int64_t begin, int64_t end) {
    for (int64_t pair = begin; pair < end; ++pair) {
      const uint64_t bits = splitMix64(key, static_cast<uint64_t>(pair));
      one(2 * pair, bits);
      one(2 * pair + 1, bits >> 32);
    }
  });
  if (n % 2) one(n - 1, splitMix64(key, static_cast<uint64_t>(n / 2)));
}

// grad * scale where kept, 0 elsewhere.
at::Tensor maskedScale(const at::Tensor& grad, const at::Tensor& keep, double scale) {
  if (at::GradMode::is_enabled()) return grad * keep * scale;  // differentiable, for create_graph
  const auto g = grad.contiguous();
  auto out = at::empty_like(g, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "hfta_dropout_backward", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto s = static_cast<opmath_t>(scale);
    const auto* in = g.const_data_ptr<scalar_t>();
    const auto* kept = keep.const_data_ptr<bool>();
    auto* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, g.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(static_cast<opmath_t>(in[i]) * (kept[i] ? s : opmath_t(0)));
      }
    });
  });
  return out.view(grad.sizes());
}

struct CounterDropout : torch::autograd::Function<CounterDropout> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, double p) {
    const auto x = input.contiguous();
    auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
    auto keep = at::empty(x.sizes(), x.options().dtype(at::kBool));
    const double q = 1.0 - p;
    const auto threshold = static_cast<uint64_t>(std::llround(std::ldexp(q, 32)));
    const double scale = 1.0 / q;
    const uint64_t key = drawKey();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "hfta_dropout", [&] {
      dropOut(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), keep.mutable_data_ptr<bool>(), x.numel(),
              key, threshold, scale);
    });
    ctx->save_for_backward({keep});
    ctx->saved_data["scale"] = scale;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto keep = ctx->get_saved_variables()[0];
    return {maskedScale(grads[0], keep, ctx->saved_data["scale"].toDouble()), at::Tensor()};
  }
};

bool takesCounterDropout(const at::Tensor& input, double p) {
  const auto type = input.scalar_type();
  const bool floating = type == at::kFloat || type == at::kDouble || type == at::kHalf || type == at::kBFloat16;
  return input.device().is_cpu() && floating && input.layout() == at::kStrided && p > 0 && p < 1 && input.numel() > 0;
}

}  // namespace

at::Tensor dropout(const at::Tensor& input, double p, bool train) {
  if (!train || !takesCounterDropout(input, p)) return at::dropout(input, p, train);
  return CounterDropout::apply(input, p);
}

}  // namespace hfta::ops
