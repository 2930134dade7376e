// Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (and their cells) with the
// members' weights stacked. The weights reach the op as the module's
// _flat_weights list, stacked element by element ([B, ...] each); the
// initial state is the members' own, or the zeros nn.LSTM makes, which all
// members share ([1, ...] views, expanded). Every time step runs all
// members at once (runtime/recurrent_ops.cpp).
//
//   %out, %h, %c = aten::lstm(%x, %hx, %flat_weights, %bias, %layers, %p, %train, %bidir, %batch_first)
//     ->  %out, %h, %c = hfta::lstm(%x : [B, N, T, I], %hx, %flat_weights : [B, ...] each, ...)
//
// Packed sequences (aten::lstm.data and friends: the batch sizes may differ
// per member) run per member.
#include "passes/fuse/rules/rules.h"

namespace hfta {
namespace {

// The layer op (input, hx, params, ...) as its hfta:: twin: the input and
// the initial state may be one all members share.
template <const char* kOp>
RuleResult fuseLayer(RuleContext& ctx) {
  constexpr size_t kParams = 2;
  if (ctx.kind(kParams) != ValueKind::Array) return RuleResult::decline("the weights are shared by all members");
  return fuseAsMemberOp(ctx, c10::Symbol::fromQualString(kOp), {/*input=*/0, /*hx=*/1});
}

template <const char* kOp>
RuleResult fuseCell(RuleContext& ctx) {
  constexpr size_t kWeightIh = 2, kWeightHh = 3;
  if (ctx.kind(kWeightIh) != ValueKind::Array || ctx.kind(kWeightHh) != ValueKind::Array) {
    return RuleResult::decline("the weights are shared by all members");
  }
  return fuseAsMemberOp(ctx, c10::Symbol::fromQualString(kOp), {/*input=*/0, /*hx=*/1});
}

constexpr char kLstm[] = "hfta::lstm", kGru[] = "hfta::gru", kRnnTanh[] = "hfta::rnn_tanh",
               kRnnRelu[] = "hfta::rnn_relu";
constexpr char kLstmCell[] = "hfta::lstm_cell", kGruCell[] = "hfta::gru_cell", kRnnTanhCell[] = "hfta::rnn_tanh_cell",
               kRnnReluCell[] = "hfta::rnn_relu_cell";

}  // namespace

std::vector<RuleEntry> recurrentRules() {
  return {
      {"aten::lstm.input(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
       "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)",
       "recurrent", fuseLayer<kLstm>},
      {"aten::gru.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float dropout, "
       "bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       "recurrent", fuseLayer<kGru>},
      {"aten::rnn_tanh.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float "
       "dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       "recurrent", fuseLayer<kRnnTanh>},
      {"aten::rnn_relu.input(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, float "
       "dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
       "recurrent", fuseLayer<kRnnRelu>},
      {"aten::lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) "
       "-> (Tensor, Tensor)",
       "recurrent", fuseCell<kLstmCell>},
      {"aten::gru_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None) -> "
       "Tensor",
       "recurrent", fuseCell<kGruCell>},
      {"aten::rnn_tanh_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? "
       "b_hh=None) -> Tensor",
       "recurrent", fuseCell<kRnnTanhCell>},
      {"aten::rnn_relu_cell(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? "
       "b_hh=None) -> Tensor",
       "recurrent", fuseCell<kRnnReluCell>},
  };
}

}  // namespace hfta
