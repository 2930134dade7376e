// Convolution and batch norm over B members. Both run as one ATen op on the
// channel-folded form [N, B*C, ...]: B convolutions become one grouped
// convolution (groups * B), B batch norms one batch norm over B*C channels
// whose statistics are per (member, channel), i.e. per member.
#include "runtime/ops.h"

namespace hfta::ops {
namespace {

// [B, N, C, *] -> [N, B*C, *] (a copy unless B == 1).
at::Tensor foldChannels(const at::Tensor& x) {
  auto folded = x.transpose(0, 1);
  return folded.flatten(1, 2);
}

// [N, B*C, *] -> [B, N, C, *] (a view).
at::Tensor unfoldChannels(const at::Tensor& y, int64_t members) {
  return y.unflatten(1, {members, -1}).transpose(0, 1);
}

std::optional<at::Tensor> flattened(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->view(-1);  // stacked [B, C] buffers are contiguous: a view, so updates land in them
}

// Runs `conv(folded input, weight with members flattened into dim 0, flat
// bias, groups)` for a member-leading input. For a (non-transposed)
// convolution, a shared input with groups == 1 runs as one dense
// convolution with B*Cout output channels and is never copied.
template <typename ConvFn>
at::Tensor convolveMembers(const at::Tensor& input, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, int64_t groups, ConvFn conv,
                           bool transposed = false) {
  TORCH_CHECK(weight.dim() >= 4, "hfta::conv: weight must be [B, out, in/groups, k...], got ",
              weight.sizes());
  const int64_t members = weight.size(0);
  // An unbatched member input ([C, L] for conv1d) has no N dim: add one.
  const bool unbatched = input.dim() == weight.dim() - 1;
  auto x = unbatched ? input.unsqueeze(1) : input;
  TORCH_CHECK(x.dim() == weight.dim(), "hfta::conv: input ", input.sizes(),
              " does not match weight ", weight.sizes());
  const auto w = weight.flatten(0, 1);
  const auto b = flattened(bias);
  at::Tensor y;
  if (x.size(0) == 1 && groups == 1 && !transposed) {
    y = conv(x.select(0, 0), w, b, 1);
  } else {
    y = conv(foldChannels(expand_members(x, members)), w, b, groups * members);
  }
  y = unfoldChannels(y, members);
  return unbatched ? y.squeeze(1) : y;
}

}  // namespace

at::Tensor conv(const at::Tensor& input, const at::Tensor& weight,
                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const std::vector<int64_t> output_padding(weight.dim() - 3, 0);
  return convolveMembers(input, weight, bias, groups,
                         [&](const at::Tensor& x, const at::Tensor& w,
                             const std::optional<at::Tensor>& b, int64_t g) {
                           return at::convolution(x, w, b, stride, padding, dilation,
                                                  /*transposed=*/false, output_padding, g);
                         });
}

at::Tensor conv_padding(const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                        c10::string_view padding, at::IntArrayRef dilation, int64_t groups) {
  return convolveMembers(input, weight, bias, groups,
                         [&](const at::Tensor& x, const at::Tensor& w,
                             const std::optional<at::Tensor>& b, int64_t g) {
                           return weight.dim() == 4
                                      ? at::conv1d(x, w, b, stride, padding, dilation, g)
                                      : at::conv2d(x, w, b, stride, padding, dilation, g);
                         });
}

at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t groups,
                          at::IntArrayRef dilation) {
  // weight [B, in, out/groups, k...] flattens to [B*in, out/groups, k...]:
  // group b*groups + j holds member b's group j, in and out channels alike.
  return convolveMembers(
      input, weight, bias, groups,
      [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b, int64_t g) {
        return at::convolution(x, w, b, stride, padding, dilation, /*transposed=*/true,
                               output_padding, g);
      },
      /*transposed=*/true);
}

at::Tensor batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias,
                      const std::optional<at::Tensor>& running_mean,
                      const std::optional<at::Tensor>& running_var, bool training,
                      double momentum, double eps, bool cudnn_enabled) {
  TORCH_CHECK(input.dim() >= 3, "hfta::batch_norm: input must be [B, N, C, ...], got ",
              input.sizes());
  const int64_t members = input.size(0);
  const auto y = at::batch_norm(foldChannels(input), flattened(weight), flattened(bias),
                                flattened(running_mean), flattened(running_var), training,
                                momentum, eps, cudnn_enabled);
  return unfoldChannels(y, members);
}

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  // Member b's slope is weight[b]: [C] over the member's channel dim (its
  // dim 1, so dim 2 here) or one value for all.
  std::vector<int64_t> shape(self.dim(), 1);
  shape[0] = weight.size(0);
  const int64_t slopes = weight.numel() / weight.size(0);
  if (slopes > 1) {
    TORCH_CHECK(self.dim() >= 3, "hfta::prelu: ", slopes, " slopes need a channel dim");
    shape[2] = slopes;
  }
  const auto w = weight.reshape(shape);
  return at::where(self > 0, self, w * self);
}

}  // namespace hfta::ops
