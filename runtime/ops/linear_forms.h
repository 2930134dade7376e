#pragma once
// What the per-member GEMM ops (hfta::linear, hfta::linear_log_softmax)
// share: the choice between their forms (one batched GEMM or each member's
// own, as forced by setLinearForm, else measured here, as the autotuner
// measures), the batched form's GEMM and the member-by-member form's
// backward GEMMs.
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

// x [B, M, in] @ weight [B, out, in]^T (+ bias [B, out], or undefined) as
// one batched GEMM: [B, M, out].
at::Tensor batchedGemm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Backward of member m's GEMM y_m = x_m @ weight_m^T, given g, the gradient
// of y_m: its input and weight gradients written into their slices of the
// stacked gradients grad_x and grad_weight (an undefined one is not wanted).
void writeMemberGemmGradients(int64_t m, const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight,
                              at::Tensor& grad_x, at::Tensor& grad_weight);

}  // namespace hfta::ops
