// Autocast for the hfta:: ops: each casts its inputs as autocast casts those
// of the ATen op it stands for, so a fused array under torch.autocast runs
// in the precision each member would run in alone.
//
// The hfta:: ops are composites, and autocast does reach the ATen ops inside
// them, but not always with the member's policy: hfta::conv runs
// at::convolution, which CPU autocast leaves in float32 while a member's
// aten::conv2d runs in bfloat16 (and at::convolution then refuses the
// bfloat16 input of a layer after an autocast one). So the ops with a
// policy take it here, before the composite runs, from the tables of
// ATen/autocast_mode.cpp (torch 2.11): `AT_FORALL_LOWER_PRECISION_FP` and
// `AT_FORALL_FP32` for CUDA, the `KERNEL_CPU` lists for the CPU. The ops
// without one (batch norm, embedding, the layout ops) fall through as the
// ATen ops they stand for do.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace hfta::ops {
namespace {

enum class Policy { LowerPrecision, Float32 };

// Casts every floating-point tensor argument on `kDevice` (not float64) to
// the policy's dtype, through autocast's cache of cast weights, then runs
// the op with autocast off for its body, as ATen's WrapFunction does.
template <c10::DeviceType kDevice, Policy kPolicy>
void castInputs(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto to =
      kPolicy == Policy::LowerPrecision ? at::autocast::get_lower_precision_fp_from_device_type(kDevice) : at::kFloat;
  const auto arguments = op.schema().arguments().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(arguments); it != stack->end(); ++it) {
    if (it->isTensor()) {
      *it = at::autocast::cached_cast(to, it->toTensor(), kDevice);
    } else if (it->isTensorList()) {
      *it = at::autocast::cached_cast(to, it->toTensorVector(), kDevice);
    }
  }
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(
      at::autocast::get_autocast_dispatch_key_from_device_type(kDevice));
  op.callBoxed(stack);
}

template <c10::DeviceType kDevice, Policy kPolicy>
torch::CppFunction cast() {
  return torch::CppFunction::makeFromBoxedFunction<&castInputs<kDevice, kPolicy>>();
}

// The ops that stand for convolutions, linear and matmul forms, prelu and
// attention: lower precision on both devices.
constexpr const char* kLowerPrecisionOps[] = {
    "linear",         "matmul", "addmm",
    "baddbmm",        "conv",   "conv_padding",
    "conv_transpose", "prelu",  "scaled_dot_product_attention",
};

}  // namespace
}  // namespace hfta::ops

TORCH_LIBRARY_IMPL(hfta, AutocastCPU, m) {
  using hfta::ops::cast;
  using hfta::ops::Policy;
  for (const char* op : hfta::ops::kLowerPrecisionOps) m.impl(op, cast<c10::DeviceType::CPU, Policy::LowerPrecision>());
  // CPU only: aten::_native_multi_head_attention.
  m.impl("native_multi_head_attention", cast<c10::DeviceType::CPU, Policy::LowerPrecision>());
}

TORCH_LIBRARY_IMPL(hfta, AutocastCUDA, m) {
  using hfta::ops::cast;
  using hfta::ops::Policy;
  for (const char* op : hfta::ops::kLowerPrecisionOps) {
    m.impl(op, cast<c10::DeviceType::CUDA, Policy::LowerPrecision>());
  }
  // CUDA only: aten::layer_norm runs in float32.
  m.impl("layer_norm", cast<c10::DeviceType::CUDA, Policy::Float32>());
}
