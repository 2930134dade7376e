// Convolution and the norms over B members. All read and write the
// channel-folded layout [N, B*C, ...] and run as one ATen op: B convolutions
// become one grouped convolution (groups * B), B batch (instance) norms one
// batch (instance) norm over B*C channels whose statistics are per (member,
// channel), i.e. each member's own, and B group norms one group norm with
// B * G groups.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <functional>

#include "runtime/ops/autotune.h"
#include "runtime/ops/conv_unfolded.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/sync_batch_norm.h"

namespace hfta::ops {
namespace {

std::optional<at::Tensor> flattened(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->view(-1);  // stacked [B, C] buffers are contiguous: a view, so updates land in them
}

// The form of B convolutions on a channel-folded input, when autotuning is
// off (HFTA_AUTOTUNE=0; on, both forms are timed: runtime/ops/autotune.h). On
// the AMD EPYC (AVX2) this was measured on, one grouped convolution
// (groups x B) is as fast as B dense ones while each member's (C_in /
// groups) x C_out is small, and up to 2.4x slower from about 48K on
// (ResNet-18's 512-channel 3x3, MobileNet-V2's wide 1x1, PointNet's 128 ->
// 1024, DCGAN's 256 -> 512): there, B dense convolutions on the members'
// channel slices (bench/conv_forms.py; numbers in bench/README.md). CUDA
// keeps the grouped form.
constexpr int64_t kPerMemberThreshold = 48 * 1024;
std::atomic<ConvForm> forced_form{ConvForm::Chosen};

bool heuristicPerMember(const at::Tensor& input, int64_t in_channels_per_group, int64_t out_channels) {
  return input.device().is_cpu() && in_channels_per_group * out_channels >= kPerMemberThreshold;
}

template <typename ConvFn>
at::Tensor perMemberForm(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         int64_t groups, ConvFn conv) {
  // split and unbind, not narrow and select: their backward is one cat or
  // stack, where B narrows or selects would each zero-fill a whole-sized
  // gradient and B - 1 adds would sum them.
  const int64_t members = weight.size(0);
  const auto inputs = input.split(input.size(1) / members, 1);
  const auto weights = weight.unbind(0);
  const bool has_bias = bias.has_value() && bias->defined();
  const auto biases = has_bias ? bias->unbind(0) : std::vector<at::Tensor>{};
  std::vector<at::Tensor> outputs;
  for (int64_t m = 0; m < members; ++m) {
    const auto member_bias = biases.empty() ? std::nullopt : std::optional<at::Tensor>(biases[m]);
    outputs.push_back(conv(inputs[m], weights[m], member_bias, groups));
  }
  return at::cat(outputs, 1);
}

std::vector<std::string> formNames(const std::vector<ConvForm>& forms) {
  std::vector<std::string> names;
  for (const auto form : forms) {
    names.push_back(form == ConvForm::PerMember      ? "per-member"
                    : form == ConvForm::ChannelsLast ? "channels-last"
                    : form == ConvForm::Unfolded     ? "unfolded"
                                                     : "grouped");
  }
  return names;
}

// Whether a 2-D convolution's input is channels-last (and not contiguous
// too, as one with a single channel or pixel is).
bool channelsLast(const at::Tensor& t) {
  return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) && !t.is_contiguous();
}

// What names a convolution besides its tensors, for the autotuner and the
// unfolded form.
struct ConvSettings {
  at::IntArrayRef stride, padding, dilation;
  c10::string_view padding_mode;  // "same" or "valid" where padding is given as a mode

  void appendTo(autotune::Memo::Signature& signature) const {
    for (const auto list : {stride, padding, dilation}) {
      signature.push_back(static_cast<int64_t>(list.size()));
      signature.append(list.begin(), list.end());
    }
    signature.push_back(padding_mode.empty() ? 0 : padding_mode == "same" ? 1 : 2);
  }
  std::string text() const {
    return fmt::format("stride [{}] padding {} dilation [{}]", fmt::join(stride, ","),
                       padding_mode.empty() ? fmt::format("[{}]", fmt::join(padding, ",")) : std::string(padding_mode),
                       fmt::join(dilation, ","));
  }
};

// Whether this convolution can take the unfolded form: a 2-D one of
// ungrouped members with its padding given as numbers, not as a mode.
bool canRunUnfolded(const at::Tensor& input, const at::Tensor& weight, int64_t groups, const ConvSettings& settings) {
  return settings.padding_mode.empty() && unfoldable(input, weight, groups);
}

template <typename ConvFn>
at::Tensor runForm(ConvForm form, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, int64_t groups, ConvFn conv, const ConvSettings& settings) {
  const auto flat_bias = flattened(bias);
  switch (form) {
    case ConvForm::PerMember:
      return perMemberForm(input, weight, bias, groups, conv);
    case ConvForm::Unfolded:
      if (canRunUnfolded(input, weight, groups, settings)) {
        return unfoldedConv(input, weight, bias, settings.stride, settings.padding, settings.dilation);
      }
      break;  // (one that cannot runs grouped)
    case ConvForm::ChannelsLast:
      if (input.dim() == 4) {
        // The output goes back to the input's layout: the ops after it
        // run as they would (a whole ResNet-18 kept channels-last after its
        // first convolution ran slower than none), and the timing sees the
        // form's whole cost.
        const auto out =
            conv(input.contiguous(at::MemoryFormat::ChannelsLast),
                 weight.flatten(0, 1).contiguous(at::MemoryFormat::ChannelsLast), flat_bias, groups * weight.size(0));
        return out.contiguous(input.suggest_memory_format());
      }
      break;  // (no channels-last layout for 1-D or 3-D convolutions)
    default:
      break;
  }
  return conv(input, weight.flatten(0, 1), flat_bias, groups * weight.size(0));
}

// The form B convolutions of this shape run in: as forced, else the fastest
// measured here (forward and, where gradients are on, backward; the
// channels-last form's cost includes both layout conversions), else the
// heuristic.
template <typename ConvFn>
ConvForm chooseForm(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                    int64_t groups, ConvFn conv, const ConvSettings& settings) {
  const auto forced = forced_form.load();
  if (forced != ConvForm::Chosen) return forced;
  const auto heuristic =
      heuristicPerMember(input, weight.size(2), weight.size(1)) ? ConvForm::PerMember : ConvForm::Grouped;
  if (!autotune::enabled()) return heuristic;
  const bool backward = autotune::recordsGradients();
  const bool channels_last = channelsLast(input);
  std::vector<ConvForm> forms{ConvForm::Grouped, ConvForm::PerMember};
  // (a channels-last input runs channels-last as Grouped)
  if (input.dim() == 4 && !channels_last) forms.push_back(ConvForm::ChannelsLast);
  if (canRunUnfolded(input, weight, groups, settings) &&
      unfoldedWorthTiming(input, weight, settings.stride, settings.padding, settings.dilation)) {
    forms.push_back(ConvForm::Unfolded);
  }
  static autotune::Memo memo;
  autotune::Memo::Signature signature{backward, channels_last, groups};
  autotune::appendTensor(signature, input);
  autotune::appendTensor(signature, weight);
  signature.push_back(bias.has_value());
  settings.appendTo(signature);
  // The key names the forms timed, so a choice among others is not misread.
  const auto key = [&] {
    return fmt::format(
        "hfta::conv|in [{}]{}|weight [{}]|bias {}|groups {}|{}|{}|{}|{}|forms {}|{}", fmt::join(input.sizes(), ","),
        channels_last ? " channels-last" : "", fmt::join(weight.sizes(), ","), bias.has_value(), groups,
        settings.text(), c10::toString(input.scalar_type()), input.device().str(),
        backward ? "forward+backward" : "forward", fmt::join(formNames(forms), ","), autotune::machine(input.device()));
  };
  const auto candidates = [&] {
    std::vector<std::function<void()>> runs;
    for (const auto form : forms) {
      runs.push_back(autotune::candidate(
          {input, weight, bias.value_or(at::Tensor())}, backward, [&, form](const std::vector<at::Tensor>& t) {
            return runForm(form, t[0], t[1], t[2].defined() ? std::optional(t[2]) : std::nullopt, groups, conv,
                           settings);
          }));
    }
    return runs;
  };
  const auto fallback = std::find(forms.begin(), forms.end(), heuristic) - forms.begin();
  return forms[memo.choose(signature, fallback, key, candidates)];
}

// Runs `conv(folded input, weight with members flattened into dim 0, flat
// bias, groups)`. The input is channel-folded ([N, B*C, *]) or one input
// all members share ([N, C, *]; told apart by the channel count, B >= 2):
// a shared input with groups == 1 runs as one dense convolution with
// B*Cout output channels and is never copied. `settings` names the
// convolution for the autotuner.
template <typename ConvFn>
at::Tensor convolveMembers(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           int64_t groups, ConvFn conv, const ConvSettings& settings, bool transposed = false) {
  TORCH_CHECK(weight.dim() >= 4, "hfta::conv: weight must be [B, out, in/groups, k...], got ", weight.sizes());
  TORCH_CHECK(input.dim() == weight.dim() - 1,
              "hfta::conv: fused convolutions need batched member inputs [N, C, ...]; got input ", input.sizes(),
              " for weight ", weight.sizes());
  const int64_t members = weight.size(0);
  const int64_t in_channels = transposed ? weight.size(1) : weight.size(2) * groups;
  const auto w = weight.flatten(0, 1);
  const auto b = flattened(bias);
  if (input.size(1) == in_channels) {  // shared by all members
    if (groups == 1 && !transposed) return conv(input, w, b, 1);
    return conv(fold_channels(input.unsqueeze(0), members), w, b, groups * members);
  }
  TORCH_CHECK(input.size(1) == members * in_channels, "hfta::conv: input ", input.sizes(), " has neither ", in_channels,
              " nor ", members, " x ", in_channels, " channels");
  if (transposed) return conv(input, w, b, groups * members);
  return runForm(chooseForm(input, weight, bias, groups, conv, settings), input, weight, bias, groups, conv, settings);
}

}  // namespace

ConvForm convForm() { return forced_form.load(); }
void setConvForm(ConvForm form) { forced_form = form; }

at::Tensor conv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const std::vector<int64_t> output_padding(weight.dim() - 3, 0);
  return convolveMembers(
      input, weight, bias, groups,
      [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b, int64_t g) {
        return at::convolution(x, w, b, stride, padding, dilation,
                               /*transposed=*/false, output_padding, g);
      },
      ConvSettings{stride, padding, dilation, {}});
}

at::Tensor conv_padding(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, c10::string_view padding, at::IntArrayRef dilation, int64_t groups) {
  return convolveMembers(
      input, weight, bias, groups,
      [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b, int64_t g) {
        switch (weight.dim()) {  // [B, out, in/groups, k...]
          case 4:
            return at::conv1d(x, w, b, stride, padding, dilation, g);
          case 5:
            return at::conv2d(x, w, b, stride, padding, dilation, g);
          default:
            return at::conv3d(x, w, b, stride, padding, dilation, g);
        }
      },
      ConvSettings{stride, {}, dilation, padding});
}

at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                          int64_t groups, at::IntArrayRef dilation) {
  // weight [B, in, out/groups, k...] flattens to [B*in, out/groups, k...]:
  // group b*groups + j holds member b's group j, in and out channels alike.
  return convolveMembers(
      input, weight, bias, groups,
      [&](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b, int64_t g) {
        return at::convolution(x, w, b, stride, padding, dilation, /*transposed=*/true, output_padding, g);
      },
      ConvSettings{}, /*transposed=*/true);
}

at::Tensor batch_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                      const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
                      bool cudnn_enabled) {
  if (training && batchNormSynchronized()) {
    return syncBatchNorm(input, flattened(weight), flattened(bias), flattened(running_mean), flattened(running_var),
                         at::full({input.size(1)}, momentum, at::kDouble), eps);
  }
  return at::batch_norm(input, flattened(weight), flattened(bias), flattened(running_mean), flattened(running_var),
                        training, momentum, eps, cudnn_enabled);
}

at::Tensor batch_norm_momenta(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                              const std::optional<at::Tensor>& running_var, bool training, at::ArrayRef<double> momenta,
                              double eps, bool cudnn_enabled) {
  TORCH_CHECK(!momenta.empty(), "hfta::batch_norm_momenta: no momentum");
  const bool updates = training && running_mean.has_value() && running_mean->defined();
  const bool all_equal = std::all_of(momenta.begin(), momenta.end(), [&](double m) { return m == momenta[0]; });
  if (!updates || all_equal) {
    return hfta::ops::batch_norm(input, weight, bias, running_mean, running_var, training, momenta[0], eps,
                                 cudnn_enabled);
  }
  const int64_t members = static_cast<int64_t>(momenta.size());
  const auto per_channel = at::tensor(std::vector<double>(momenta.begin(), momenta.end()), at::kDouble)
                               .repeat_interleave(input.size(1) / members);
  if (batchNormSynchronized()) {
    return syncBatchNorm(input, flattened(weight), flattened(bias), flattened(running_mean), flattened(running_var),
                         per_channel, eps);
  }
  // Normalize with the batch statistics, then update each member's running
  // statistics with its own momentum, as at::batch_norm does with one.
  auto output = at::batch_norm(input, flattened(weight), flattened(bias), std::nullopt, std::nullopt, /*training=*/true,
                               0.0, eps, cudnn_enabled);
  at::NoGradGuard no_grad;
  std::vector<int64_t> reduced{0};
  for (int64_t d = 2; d < input.dim(); ++d) reduced.push_back(d);
  // In the statistics' dtype, as at::batch_norm accumulates them: under
  // autocast the input may be bfloat16 or float16.
  const auto [var, mean] = at::var_mean(input.to(running_mean->scalar_type()), reduced, /*correction=*/1);
  const auto m = per_channel.to(input.options().dtype(running_mean->scalar_type()));
  auto rm = flattened(running_mean).value();
  rm.mul_(1 - m).add_(m * mean);
  if (running_var.has_value() && running_var->defined()) {
    auto rv = flattened(running_var).value();
    rv.mul_(1 - m).add_(m * var);
  }
  return output;
}

at::Tensor group_norm(const at::Tensor& input, int64_t num_groups, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, bool cudnn_enabled, int64_t array_size) {
  // Each member's channels are contiguous in the folded layout and split
  // into num_groups equal groups, so group k of the B * num_groups holds
  // member k / num_groups's group k % num_groups: the same elements, in the
  // same order, as the member's own group norm normalizes.
  return at::group_norm(input, num_groups * array_size, flattened(weight), flattened(bias), eps, cudnn_enabled);
}

at::Tensor instance_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                         const std::optional<at::Tensor>& running_var, bool use_input_stats, double momentum,
                         double eps, bool cudnn_enabled) {
  // at::instance_norm normalizes each (sample, channel) alone and averages
  // the channels' running statistics over the batch: per channel, so the
  // folded channels are each member's own, and the statistics it copies
  // back land in the stacked buffers through their [B*C] views.
  return at::instance_norm(input, flattened(weight), flattened(bias), flattened(running_mean), flattened(running_var),
                           use_input_stats, momentum, eps, cudnn_enabled);
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
