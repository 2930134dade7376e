// The fused SGD step on CUDA: one launch per stacked parameter; thread i
// updates element i with the hyper-parameters of the member it belongs to,
// read from device memory, so B learning rates cost no extra launches.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "runtime/sgd.h"

namespace hfta::optim::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;

template <typename scalar_t>
__global__ void sgdStepKernel(scalar_t* __restrict__ param,
                              const scalar_t* __restrict__ grad,
                              scalar_t* __restrict__ momentum_buffer,
                              const double* __restrict__ hyper, int64_t members,
                              int64_t member_numel, bool first_step) {
  const int64_t numel = members * member_numel;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / member_numel;
    const double lr = hyper[b];
    const double momentum = hyper[members + b];
    const double dampening = momentum == 0 ? 0.0 : hyper[2 * members + b];
    const double weight_decay = hyper[3 * members + b];
    const bool nesterov = hyper[4 * members + b] != 0;
    using acc_t = at::opmath_type<scalar_t>;
    acc_t p = param[i];
    acc_t d = static_cast<acc_t>(grad[i]) + static_cast<acc_t>(weight_decay) * p;
    if (momentum_buffer != nullptr) {
      acc_t buf = first_step ? d
                             : static_cast<acc_t>(momentum) * static_cast<acc_t>(momentum_buffer[i]) +
                                   static_cast<acc_t>(1 - dampening) * d;
      momentum_buffer[i] = buf;
      d = nesterov ? d + static_cast<acc_t>(momentum) * buf : buf;
    }
    param[i] = p - static_cast<acc_t>(lr) * d;
  }
}

}  // namespace

void sgdStep(at::Tensor& param, const at::Tensor& grad, at::Tensor& momentum_buffer,
             const at::Tensor& hyper, bool first_step) {
  TORCH_CHECK(param.is_contiguous() && grad.is_contiguous(),
              "hfta SGD (CUDA): parameters and gradients must be contiguous");
  const c10::cuda::CUDAGuard guard(param.device());
  const int64_t members = param.size(0);
  const int64_t member_numel = param.numel() / members;
  const int64_t blocks = std::min<int64_t>((param.numel() + kThreadsPerBlock - 1) / kThreadsPerBlock,
                                           65535);
  if (param.numel() == 0) return;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, param.scalar_type(), "hfta_sgd_step", [&] {
    sgdStepKernel<scalar_t><<<blocks, kThreadsPerBlock, 0, at::cuda::getCurrentCUDAStream()>>>(
        param.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(),
        momentum_buffer.defined() ? momentum_buffer.data_ptr<scalar_t>() : nullptr,
        hyper.data_ptr<double>(), members, member_numel, first_step);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace hfta::optim::cuda
