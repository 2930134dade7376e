#pragma once
// Gradient clipping per member: member b's gradients (over all stacked
// parameters) are clipped with member b's threshold and its own norm, as
// torch.nn.utils.clip_grad_norm_ / clip_grad_value_ would clip them alone.
// Nothing mixes across members: one member's NaN gradient leaves the others
// as they were.
#include <ATen/ATen.h>

#include <vector>

#include "runtime/optim/per_member.h"

namespace hfta::optim {

// Scales member b's gradients by min(1, max_norm[b] / (norm_b + 1e-6)),
// where norm_b is the norm_type-norm of all of member b's gradients
// (inf: the largest absolute value). Returns the norms [B] before clipping.
at::Tensor clip_grad_norm_per_member(const std::vector<at::Tensor>& params, int64_t array_size,
                                     const PerMember& max_norm, double norm_type = 2.0);

// Clamps member b's gradients to [-clip_value[b], clip_value[b]].
void clip_grad_value_per_member(const std::vector<at::Tensor>& params, int64_t array_size, const PerMember& clip_value);

}  // namespace hfta::optim
