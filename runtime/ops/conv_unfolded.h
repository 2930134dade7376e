#pragma once
// B 2-D convolutions as matrix products over their unfolded inputs (im2col):
// the unfolded form of hfta::conv (ConvForm::Unfolded).
#include <ATen/ATen.h>

namespace hfta::ops {

// Whether B convolutions can run unfolded: 2-D, each member's own
// convolution ungrouped, the input channel-folded [N, B*C, H, W].
bool unfoldable(const at::Tensor& input, const at::Tensor& weight, int64_t groups);

// Whether the unfolded form is worth timing: where a member's unfolded
// input (N*H_out*W_out columns) is no larger than its weight (C_out rows).
// There oneDNN's weight gradient ran at a third of its forward's speed
// (DCGAN-D's 256 -> 512 4x4: 7.5 ms against 2.7, batch 8, 2 Xeon cores),
// and the per-member form's stack of B weight gradients is as large as the
// weight; elsewhere the columns cost more than they save.
bool unfoldedWorthTiming(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation);

// input [N, B*C, H, W], weight [B, C_out, C, kh, kw], bias [B, C_out] or
// none -> [N, B*C_out, H_out, W_out], in the input's memory format.
// Forward: one batched GEMM of the weights over the unfolded input. Backward:
// one batched GEMM for the weight gradient, written as the stacked [B, ...]
// gradient itself, and each member's own input gradient (oneDNN's data
// gradient ran faster than a GEMM and col2im).
at::Tensor unfoldedConv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation);

}  // namespace hfta::ops
