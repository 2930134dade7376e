// Convolutions: B members' convolutions become one grouped convolution that
// reads and writes the channel-folded layout [N, B*C, *]. A shared input is
// passed as it is: one dense convolution with B*C_out channels reads it.
//
// 1-D, 2-D and 3-D alike: the hfta:: ops take any number of spatial dims.
//
//   %y = aten::conv2d(%x, %w, %b, %stride, %pad, %dil, %groups)
//     ->  %y = hfta::conv(%x_folded, %w, %b, %stride, %pad, %dil, %groups)   # Folded
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

// The checks every form shares; input 0 is the input, 1 the weight, 2 the
// bias, the rest settings.
std::optional<RuleResult> declineConvolution(RuleContext& ctx) {
  if (ctx.kind(1) != ValueKind::Array) {
    return RuleResult::decline("the weight is shared by all members, not one per member");
  }
  if (!ctx.uniformFrom(3)) return RuleResult::decline("a convolution setting differs per member");
  if (ctx.kind(2) == ValueKind::PerMember) return RuleResult::decline("the bias is not a tensor");
  return std::nullopt;
}

// The input's fused form: a shared input as it is, else channel-folded.
torch::jit::Value* convolutionInput(RuleContext& ctx) {
  return ctx.kind(0) == ValueKind::Uniform ? ctx.uniform(0) : ctx.folded(0);
}

// Input 0 the input, 1 the weight, 2 the bias; the rest are settings that
// go to `op` unchanged.
RuleResult fuseConvolution(RuleContext& ctx, c10::Symbol op) {
  if (auto declined = declineConvolution(ctx)) return *declined;
  std::vector<torch::jit::NamedValue> args{convolutionInput(ctx), ctx.array(1), ctx.arrayOrNone(2)};
  for (size_t i = 3; i < ctx.node()->inputs().size(); ++i) args.emplace_back(ctx.uniform(i));
  ctx.bindOutput(0, ctx.insert(op, args), ValueKind::Folded);
  return RuleResult::fused();
}

RuleResult fuseConv(RuleContext& ctx) { return fuseConvolution(ctx, kind::conv()); }

// aten::convolution and aten::_convolution (what tracing records): input,
// weight, bias, stride, padding, dilation, transposed, output_padding,
// groups, then backend flags that do not change the result.
RuleResult fuseGenericConvolution(RuleContext& ctx) {
  if (auto declined = declineConvolution(ctx)) return *declined;
  const auto transposed = torch::jit::constant_as<bool>(ctx.input(6).value);
  if (!transposed) return RuleResult::decline("whether the convolution is transposed is not a constant");
  std::vector<torch::jit::NamedValue> args{convolutionInput(ctx), ctx.array(1), ctx.arrayOrNone(2), ctx.uniform(3),
                                           ctx.uniform(4)};
  if (*transposed) {
    args.insert(args.end(), {ctx.uniform(7), ctx.uniform(8), ctx.uniform(5)});
  } else {
    args.insert(args.end(), {ctx.uniform(5), ctx.uniform(8)});
  }
  ctx.bindOutput(0, ctx.insert(*transposed ? kind::conv_transpose() : kind::conv(), args), ValueKind::Folded);
  return RuleResult::fused();
}
RuleResult fuseConvPadding(RuleContext& ctx) { return fuseConvolution(ctx, kind::conv_padding()); }
// conv_transpose's weight is [in, out/groups, k...]; grouping by member
// works the same way (see hfta::conv_transpose).
RuleResult fuseConvTranspose(RuleContext& ctx) { return fuseConvolution(ctx, kind::conv_transpose()); }

}  // namespace

std::vector<Rule> rules::conv() {
  return {
      {"aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], SymInt[1] padding=[0], "
       "SymInt[1] dilation=[1], SymInt groups=1) -> Tensor",
       fuseConv},
      {"aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], SymInt[2] padding=[0, "
       "0], SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor",
       fuseConv},
      {"aten::conv3d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1], SymInt[3] "
       "padding=[0, 0, 0], SymInt[3] dilation=[1, 1, 1], SymInt groups=1) -> Tensor",
       fuseConv},
      {"aten::conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], str "
       "padding=\"valid\", SymInt[1] dilation=[1], SymInt groups=1) -> Tensor",
       fuseConvPadding},
      {"aten::conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], str "
       "padding=\"valid\", SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor",
       fuseConvPadding},
      {"aten::conv3d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1], str "
       "padding=\"valid\", SymInt[3] dilation=[1, 1, 1], SymInt groups=1) -> Tensor",
       fuseConvPadding},
      {"aten::conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], SymInt[1] "
       "padding=[0], SymInt[1] output_padding=[0], SymInt groups=1, SymInt[1] dilation=[1]) -> Tensor",
       fuseConvTranspose},
      {"aten::conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], "
       "SymInt[2] padding=[0, 0], SymInt[2] output_padding=[0, 0], SymInt groups=1, SymInt[2] dilation=[1, 1]) -> "
       "Tensor",
       fuseConvTranspose},
      {"aten::conv_transpose3d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1], "
       "SymInt[3] padding=[0, 0, 0], SymInt[3] output_padding=[0, 0, 0], SymInt groups=1, SymInt[3] dilation=[1, 1, "
       "1]) -> Tensor",
       fuseConvTranspose},
      {"aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] "
       "dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
       fuseGenericConvolution},
      {"aten::_convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] "
       "dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool benchmark, bool deterministic, bool "
       "cudnn_enabled, bool allow_tf32) -> Tensor",
       fuseGenericConvolution},
  };
}

}  // namespace hfta
