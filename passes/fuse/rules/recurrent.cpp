// Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (and their cells) with the
// members' weights stacked. The weights reach the op as the module's
// _flat_weights list, stacked element by element ([B, ...] each); the
// initial state is the members' own, or the zeros nn.LSTM makes, which all
// members share ([1, ...] views, expanded). Every time step runs all
// members at once (runtime/ops/recurrent_ops.cpp).
//
//   %out, %h, %c = aten::lstm(%x, %hx, %flat_weights, %bias, %layers, %p, %train, %bidir, %batch_first)
//     ->  %out, %h, %c = hfta::lstm(%x : [B, N, T, I], %hx, %flat_weights : [B, ...] each, ...)
//
// Packed sequences (aten::lstm.data and friends: the batch sizes may differ
// per member) run per member.
#include "passes/fuse/rules/rules.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

// The layer op (input, hx, params, ...) as its hfta:: twin: the input and
// the initial state may be one all members share.
template <c10::Symbol (*kOp)()>
RuleResult fuseLayer(RuleContext& ctx) {
  constexpr size_t kParams = 2;
  if (ctx.kind(kParams) != ValueKind::Array) return RuleResult::decline("the weights are shared by all members");
  return fuseAsMemberOp(ctx, kOp(), {/*input=*/0, /*hx=*/1});
}

template <c10::Symbol (*kOp)()>
RuleResult fuseCell(RuleContext& ctx) {
  constexpr size_t kWeightIh = 2, kWeightHh = 3;
  if (ctx.kind(kWeightIh) != ValueKind::Array || ctx.kind(kWeightHh) != ValueKind::Array) {
    return RuleResult::decline("the weights are shared by all members");
  }
  return fuseAsMemberOp(ctx, kOp(), {/*input=*/0, /*hx=*/1});
}

}  // namespace

std::vector<Rule> rules::recurrent() {
  return {
      {"aten::lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
       "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)",
       fuseLayer<kind::lstm>},
      {"aten::gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
       "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       fuseLayer<kind::gru>},
      {"aten::rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float "
       "dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       fuseLayer<kind::rnn_tanh>},
      {"aten::rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float "
       "dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       fuseLayer<kind::rnn_relu>},
      {"aten::lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) "
       "-> (Tensor, Tensor)",
       fuseCell<kind::lstm_cell>},
      {"aten::gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> "
       "Tensor",
       fuseCell<kind::gru_cell>},
      {"aten::rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? "
       "b_hh=None) -> Tensor",
       fuseCell<kind::rnn_tanh_cell>},
      {"aten::rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? "
       "b_hh=None) -> Tensor",
       fuseCell<kind::rnn_relu_cell>},
  };
}

}  // namespace hfta
