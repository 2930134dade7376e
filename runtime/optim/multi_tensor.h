#pragma once
// The CUDA driver of the update rules: every element of every parameter of
// every member in one kernel launch. The launch reads a table (in device
// memory, so the number of tensors is not bounded by the kernel-argument
// size) of the tensors' pointers, of chunks (a range of one member of one
// tensor each, so a block's scalars are one member's), and of the scalars
// per (tensor, member).
#include <ATen/ATen.h>

#include <array>
#include <vector>

#include "runtime/optim/update_rules.h"

namespace hfta::optim::cuda {

struct TensorGroup {
  std::vector<at::Tensor> params;  // [B, ...], contiguous, on one CUDA device, one dtype
  std::vector<at::Tensor> grads;   // like params
  // Per tensor, the state slots the rule uses (undefined where unused).
  std::vector<std::array<at::Tensor, rules::kMaxStates>> states;
};

// multiTensorApply: scalars[t * members + b] are member b's scalars for
// tensor t; members marked in `idle` are left as they are.
// multiTensorUnscale, the loss scaler's unscale in one launch: member b's
// elements of every gradient ([B, ...], contiguous, one dtype) times
// inv_scale[b]; found_inf[b] (float32 [B] on the device) set to 1 where
// one of them is not finite.
#ifdef HFTA_WITH_CUDA
template <typename Rule>
void multiTensorApply(TensorGroup& group, const std::vector<typename Rule::Scalars>& scalars, int64_t members,
                      const std::vector<uint8_t>& idle);
void multiTensorUnscale(const std::vector<at::Tensor>& grads, const std::vector<float>& inv_scale,
                        at::Tensor& found_inf);
#else
inline void multiTensorUnscale(const std::vector<at::Tensor>&, const std::vector<float>&, at::Tensor&) {
  TORCH_CHECK(false, "hfta loss scaler: the gradients are on a CUDA device, but hfta was built without CUDA");
}
template <typename Rule>
void multiTensorApply(TensorGroup&, const std::vector<typename Rule::Scalars>&, int64_t, const std::vector<uint8_t>&) {
  TORCH_CHECK(false, "hfta optimizer: the parameters are on a CUDA device, but hfta was built without CUDA");
}
#endif

}  // namespace hfta::optim::cuda
