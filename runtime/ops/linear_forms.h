#pragma once
// The choice between the forms of a per-member GEMM op (hfta::linear,
// hfta::linear_log_softmax): one batched GEMM or each member's own, as
// forced (setLinearForm), else measured here, as the autotuner measures.
#include <ATen/ATen.h>

#include "runtime/ops/autotune.h"
#include "runtime/ops/ops.h"

namespace hfta::ops {

// Runs the op in `form` on x [B, M, in], weight [B, out, in] and bias
// [B, out] (or undefined).
using LinearRun = at::Tensor (*)(LinearForm, const at::Tensor&, const at::Tensor&, const at::Tensor&);

// The forced form, else the faster of `run`'s two forms measured here for
// these tensors (cached under `op`'s name and their shapes; `memo` is the
// op's own), else Batched with HFTA_AUTOTUNE=0.
LinearForm chooseLinearForm(const char* op, autotune::Memo& memo, LinearRun run, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& bias);

}  // namespace hfta::ops
