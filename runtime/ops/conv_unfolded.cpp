// B 2-D convolutions as batched GEMMs over their unfolded inputs. Where a
// convolution's weight is large next to its activations (ResNet-18's
// 512-channel 3x3 at 4x4, DCGAN-D's 256 -> 512 at 8x8; bench/RESULTS.md) the
// per-member form spent its backward in oneDNN's weight gradient and in the
// stack of B weight gradients; here the weight gradient is one bmm that
// writes the stacked gradient itself.
#include "runtime/ops/conv_unfolded.h"

#include <torch/csrc/autograd/custom_function.h>

namespace hfta::ops {
namespace {

// ATen accepts one value for both spatial dims.
int64_t spatial(at::IntArrayRef values, int64_t dim) { return values.size() == 1 ? values[0] : values[dim]; }

int64_t outputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

struct Geometry {
  int64_t members, batch, channels, out_channels, kernel_h, kernel_w, out_h, out_w;
  std::vector<int64_t> stride, padding, dilation;  // two each

  Geometry(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride_, at::IntArrayRef padding_,
           at::IntArrayRef dilation_)
      : members(weight.size(0)),
        batch(input.size(0)),
        channels(weight.size(2)),
        out_channels(weight.size(1)),
        kernel_h(weight.size(3)),
        kernel_w(weight.size(4)),
        stride{spatial(stride_, 0), spatial(stride_, 1)},
        padding{spatial(padding_, 0), spatial(padding_, 1)},
        dilation{spatial(dilation_, 0), spatial(dilation_, 1)} {
    out_h = outputSize(input.size(2), kernel_h, stride[0], padding[0], dilation[0]);
    out_w = outputSize(input.size(3), kernel_w, stride[1], padding[1], dilation[1]);
  }
  int64_t columns() const { return batch * out_h * out_w; }
};

// The members' unfolded inputs, [B, C*kh*kw, N*H_out*W_out]: column (n, i,
// j) of member b holds the values its kernel meets at output pixel (i, j)
// of sample n. One copy out of a strided view of the zero-padded input
// (ATen's im2col would write [N, B*C*kh*kw, L] and need a second copy to put
// each member's columns together); differentiable, for create_graph.
at::Tensor unfoldInput(const at::Tensor& input, const Geometry& g) {
  const auto& p = g.padding;
  const auto padded = p[0] == 0 && p[1] == 0 ? input : at::constant_pad_nd(input, {p[1], p[1], p[0], p[0]});
  const auto s = padded.strides();  // [N, B*C, H, W], any memory format
  const auto view = padded.as_strided({g.members, g.channels, g.kernel_h, g.kernel_w, g.batch, g.out_h, g.out_w},
                                      {g.channels * s[1], s[1], g.dilation[0] * s[2], g.dilation[1] * s[3], s[0],
                                       g.stride[0] * s[2], g.stride[1] * s[3]},
                                      padded.storage_offset());
  return view.reshape({g.members, -1, g.columns()});
}

struct UnfoldedConv : torch::autograd::Function<UnfoldedConv> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation) {
    const Geometry g(input, weight, stride, padding, dilation);
    const auto columns = unfoldInput(input, g);
    const auto w = weight.reshape({g.members, g.out_channels, -1});
    const bool has_bias = bias.has_value() && bias->defined();
    const auto products = has_bias ? at::baddbmm(bias->unsqueeze(2), w, columns) : at::bmm(w, columns);
    ctx->save_for_backward({input, weight});
    ctx->saved_data["columns"] = columns;
    ctx->saved_data["bias"] = has_bias;
    ctx->saved_data["stride"] = g.stride;
    ctx->saved_data["padding"] = g.padding;
    ctx->saved_data["dilation"] = g.dilation;
    // [B, C_out, N, H_out, W_out] -> [N, B*C_out, H_out, W_out]
    return products.view({g.members, g.out_channels, g.batch, g.out_h, g.out_w})
        .permute({2, 0, 1, 3, 4})
        .reshape({g.batch, -1, g.out_h, g.out_w})
        .contiguous(input.suggest_memory_format());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &input = saved[0], &weight = saved[1];
    const auto stride = ctx->saved_data["stride"].toIntVector();
    const auto padding = ctx->saved_data["padding"].toIntVector();
    const auto dilation = ctx->saved_data["dilation"].toIntVector();
    const Geometry g(input, weight, stride, padding, dilation);
    const auto& grad = grads[0];
    // [N, B*C_out, H_out, W_out] -> [B, C_out, N*H_out*W_out]
    const auto member_grads = grad.reshape({g.batch, g.members, g.out_channels, g.out_h * g.out_w})
                                  .permute({1, 2, 0, 3})
                                  .reshape({g.members, g.out_channels, g.columns()});
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      std::vector<at::Tensor> parts;
      for (int64_t m = 0; m < g.members; ++m) {
        parts.push_back(std::get<0>(at::convolution_backward(
            grad.narrow(1, m * g.out_channels, g.out_channels), input.narrow(1, m * g.channels, g.channels),
            weight.select(0, m), std::nullopt, stride, padding, dilation, /*transposed=*/false, {0, 0},
            /*groups=*/1, {true, false, false})));
      }
      grad_input = at::cat(parts, 1);
    }
    if (ctx->needs_input_grad(1)) {
      // Under create_graph the columns are unfolded again from the saved
      // input, so the gradient is differentiable in the input too.
      const auto columns = at::GradMode::is_enabled() ? unfoldInput(input, g) : ctx->saved_data["columns"].toTensor();
      grad_weight = at::bmm(member_grads, columns.transpose(1, 2)).view(weight.sizes());
    }
    // (needs_input_grad counts the tensors given: no bias, no index 2)
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) grad_bias = member_grads.sum(2);
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool unfoldable(const at::Tensor& input, const at::Tensor& weight, int64_t groups) {
  return groups == 1 && input.dim() == 4 && weight.dim() == 5 && input.size(1) == weight.size(0) * weight.size(2);
}

bool unfoldedWorthTiming(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation) {
  return Geometry(input, weight, stride, padding, dilation).columns() <= weight.size(1);
}

at::Tensor unfoldedConv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  return UnfoldedConv::apply(input, weight, bias, stride, padding, dilation);
}

}  // namespace hfta::ops
