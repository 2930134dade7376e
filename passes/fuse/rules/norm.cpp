// Batch norm: one batch norm over the channel-folded input [N, B*C, *] whose
// statistics are per (member, channel), i.e. each member's own. Weight,
// bias and running statistics are stacked [B, C] and passed as [B*C] views,
// so the in-place updates of the running statistics land in each member's
// slice of the stacked buffers. momentum=None makes the momentum each
// member's 1 / num_batches_tracked: a per-member list, which
// hfta::batch_norm_momenta takes.
//
// Instance norm is batch norm per (sample, channel): on the folded input
// each member's channels are its own, and the running statistics (averaged
// over the batch per channel) update each member's slice likewise.
//
// Group norm over the folded layout with B * G groups is each member's own
// group norm: a member's C channels are contiguous there, so group
// b * G + g is member b's group g (hfta::group_norm).
//
// Layer norm normalizes each member's values over its own last dims: once
// for all members, then each member's own weight and bias
// (hfta::layer_norm; no affine, any normalized shape).
//
//   %y = aten::batch_norm(%x, %w, %b, %mean, %var, %training, %momentum, %eps, %cudnn)
//     ->  %y = hfta::batch_norm(%x_folded, %w, %b, %mean, %var, %training, %momentum, %eps, %cudnn)
//   %y = aten::instance_norm(%x, %w, %b, %mean, %var, %use_input_stats, %momentum, %eps, %cudnn)
//     ->  %y = hfta::instance_norm(%x_folded, %w, %b, %mean, %var, %use_input_stats, %momentum, %eps, %cudnn)
//   %y = aten::group_norm(%x, %G, %w, %b, %eps, %cudnn)
//     ->  %y = hfta::group_norm(%x_folded, %G, %w, %b, %eps, %cudnn, B)           # Folded
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

// The per-member tensors at `inputs` (affine parameters, running
// statistics): each is stacked [B, C] or None. Appends them to `args`, or
// says why not.
std::optional<RuleResult> stackedOrNone(RuleContext& ctx, const std::vector<size_t>& inputs,
                                        std::vector<torch::jit::NamedValue>& args) {
  for (size_t i : inputs) {
    if (ctx.kind(i) == ValueKind::PerMember) return RuleResult::decline("a statistic is not a tensor");
    const bool none = ctx.kind(i) == ValueKind::Uniform && ctx.input(i).value->mustBeNone();
    if (!none && ctx.kind(i) != ValueKind::Array) {
      return RuleResult::decline("an affine parameter or statistic is shared by all members");
    }
    args.emplace_back(ctx.input(i).value);
  }
  return std::nullopt;
}

RuleResult fuseBatchNorm(RuleContext& ctx) {
  constexpr size_t kTraining = 5, kMomentum = 6, kEps = 7, kCudnn = 8;
  for (size_t i : {kTraining, kEps, kCudnn}) {
    if (ctx.kind(i) != ValueKind::Uniform) return RuleResult::decline("training or eps differs per member");
  }
  std::vector<torch::jit::NamedValue> args{ctx.folded(0)};
  // weight, bias, running_mean, running_var
  if (auto declined = stackedOrNone(ctx, {1, 2, 3, 4}, args)) return *declined;
  const bool one_momentum = ctx.kind(kMomentum) == ValueKind::Uniform;
  args.emplace_back(ctx.uniform(kTraining));
  args.emplace_back(one_momentum ? ctx.uniform(kMomentum) : ctx.fuser().toPerMember(ctx.input(kMomentum)));
  args.emplace_back(ctx.uniform(kEps));
  args.emplace_back(ctx.uniform(kCudnn));
  ctx.bindOutput(0, ctx.insert(one_momentum ? kind::batch_norm() : kind::batch_norm_momenta(), args),
                 ValueKind::Folded);
  return RuleResult::fused();
}

// Input 0, then weight, bias, running_mean, running_var and settings that
// every member shares.
RuleResult fuseInstanceNorm(RuleContext& ctx) {
  if (!ctx.uniformFrom(5)) return RuleResult::decline("use_input_stats, momentum or eps differs per member");
  std::vector<torch::jit::NamedValue> args{ctx.folded(0)};
  if (auto declined = stackedOrNone(ctx, {1, 2, 3, 4}, args)) return *declined;
  for (size_t i = 5; i < ctx.node()->inputs().size(); ++i) args.emplace_back(ctx.uniform(i));
  ctx.bindOutput(0, ctx.insert(kind::instance_norm(), args), ValueKind::Folded);
  return RuleResult::fused();
}

// group_norm(input, num_groups, weight, bias, eps, cudnn_enabled).
RuleResult fuseGroupNorm(RuleContext& ctx) {
  constexpr size_t kGroups = 1, kEps = 4, kCudnn = 5;
  for (size_t i : {kGroups, kEps, kCudnn}) {
    if (ctx.kind(i) != ValueKind::Uniform) return RuleResult::decline("the group count or eps differs per member");
  }
  std::vector<torch::jit::NamedValue> args{ctx.folded(0), ctx.uniform(kGroups)};
  if (auto declined = stackedOrNone(ctx, {2, 3}, args)) return *declined;
  args.insert(args.end(), {ctx.uniform(kEps), ctx.uniform(kCudnn), ctx.arraySize()});
  ctx.bindOutput(0, ctx.insert(kind::group_norm(), args), ValueKind::Folded);
  return RuleResult::fused();
}

RuleResult fuseLayerNorm(RuleContext& ctx) { return fuseAsMemberOp(ctx, kind::layer_norm(), {/*input=*/0}); }

RuleResult fusePrelu(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Array) return RuleResult::decline("the slope is shared by all members");
  ctx.bindOutput(0, ctx.insert(kind::prelu(), {ctx.array(0), ctx.array(1)}), ValueKind::Array);
  return RuleResult::fused();
}

}  // namespace

std::vector<Rule> rules::norm() {
  return {
      {"aten::batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool "
       "training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
       fuseBatchNorm},
      {"aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float "
       "eps=1.0000000000000001e-05, bool cudnn_enable=True) -> Tensor",
       fuseLayerNorm},
      {"aten::instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
       "bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor",
       fuseInstanceNorm},
      {"aten::group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float "
       "eps=1.0000000000000001e-05, bool cudnn_enabled=True) -> Tensor",
       fuseGroupNorm},
      {"aten::prelu(Tensor self, Tensor weight) -> Tensor", fusePrelu},
  };
}

}  // namespace hfta
