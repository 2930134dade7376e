#pragma once
// After fusion: a log-softmax over the features that alone reads a fused
// linear layer's output becomes one op, which may run each member's GEMM
// and its log-softmax in turn while the scores are in cache
// (runtime/ops/ops.h: hfta::linear_log_softmax):
//
//   %y = hfta::linear(%x, %w, %b)
//   %z = aten::log_softmax(%y, -1, None)   ->  %z = hfta::linear_log_softmax(%x, %w, %b)
//
// A language model's decoder and its log-probabilities are this pair.
#include <torch/csrc/jit/ir/ir.h>

namespace hfta {

// Rewrites every such pair in `block` and the blocks nested in it.
void chainLinearLogSoftmax(torch::jit::Block* block);

}  // namespace hfta
