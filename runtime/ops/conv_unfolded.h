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
// There it won (8 members forward and backward, batch 8, 2 Xeon cores: 72 ms
// for DCGAN-D's 256 -> 512 4x4 at 8x8 against 94 per member and 98 grouped;
// 61 for ResNet-18's 512-channel 3x3 at 4x4 against 73 and 73); where the
// columns outnumber the rows they cost more than they save (DCGAN-D's
// 128 -> 256 at 16x16: 66 ms against 56 grouped).
bool unfoldedWorthTiming(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation);

// input [N, B*C, H, W], weight [B, C_out, C, kh, kw], bias [B, C_out] or
// none -> [N, B*C_out, H_out, W_out], in the input's memory format.
// Forward: one batched GEMM of the weights over the unfolded input. Backward:
// one batched GEMM for the weight gradient, written as the stacked [B, ...]
// gradient itself, and each member's own input gradient (oneDNN's data
// gradient: a GEMM and col2im took 1.7x its time for ResNet-18's 512-channel
// 3x3 at 4x4, and saved 13% on DCGAN-D's 256 -> 512).
at::Tensor unfoldedConv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation);

}  // namespace hfta::ops
