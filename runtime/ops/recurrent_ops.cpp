// Recurrent layers over B members' stacked weights: nn.LSTM, nn.GRU and
// nn.RNN (aten::lstm, gru, rnn_tanh, rnn_relu) and their cells. Each step
// runs every member at once: the input projection of all time steps is one
// batched GEMM per layer and direction, the recurrence one per time step,
// the gates element-wise over [B, N, gates]. The arithmetic follows ATen's
// CPU cells (aten/src/ATen/native/RNN.cpp: gates = linear_hh(h) + the
// precomputed linear_ih(x); LSTM's i, f, g, o and GRU's r, z, n chunks), so
// a member computes what it computes alone up to the GEMMs' rounding.
#include <ATen/ATen.h>

#include "runtime/ops/ops.h"

namespace hfta::ops {
namespace {

enum class Cell { Lstm, Gru, Tanh, Relu };

int64_t gateCount(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

// One layer and direction's weights, each [B, ...] (bias and projection
// may be undefined).
struct Weights {
  at::Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
};

std::optional<at::Tensor> optional(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// The state after one step: h (and c for the LSTM).
struct State {
  at::Tensor h, c;
};

// One step of every member: x_gates = linear_ih(x_t) [B, N, G] (precomputed
// for all steps), state [B, N, H].
State step(Cell cell, const at::Tensor& x_gates, const State& state, const Weights& w) {
  const auto h_gates = hfta::ops::linear(state.h, w.w_hh, optional(w.b_hh));
  switch (cell) {
    case Cell::Lstm: {
      const auto gates = (h_gates + x_gates).chunk(4, -1);
      const auto c = gates[1].sigmoid() * state.c + gates[0].sigmoid() * gates[2].tanh();
      auto h = gates[3].sigmoid() * c.tanh();
      if (w.w_hr.defined()) h = hfta::ops::linear(h, w.w_hr, std::nullopt);  // proj_size
      return {h, c};
    }
    case Cell::Gru: {
      const auto x = x_gates.chunk(3, -1), hidden = h_gates.chunk(3, -1);
      const auto reset = (hidden[0] + x[0]).sigmoid();
      const auto update = (hidden[1] + x[1]).sigmoid();
      const auto fresh = (x[2] + hidden[2] * reset).tanh();
      return {(state.h - fresh) * update + fresh, {}};
    }
    case Cell::Tanh:
      return {(h_gates + x_gates).tanh(), {}};
    case Cell::Relu:
      return {(h_gates + x_gates).relu(), {}};
  }
  TORCH_INTERNAL_ASSERT(false, "hfta: unknown recurrent cell");
}

// One layer in one direction over x [B, T, N, I] (time at dim 1): the
// outputs [B, T, N, H_out] and the last state.
std::pair<at::Tensor, State> runDirection(Cell cell, const at::Tensor& x, State state, const Weights& w, bool reverse) {
  // All steps' input projections at once, then one view per step: unbind,
  // whose backward is one stack (a select per step would zero-fill the
  // whole gradient once per step in backward, as many times as there are
  // steps).
  const auto x_gates = hfta::ops::linear(x, w.w_ih, optional(w.b_ih)).unbind(1);
  const int64_t steps = x.size(1);
  std::vector<at::Tensor> outputs(steps);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    state = step(cell, x_gates[t], state, w);
    outputs[t] = state.h;
  }
  return {at::stack(outputs, 1), state};
}

// The members' [B|1, ...] value as [B, ...].
at::Tensor members(const at::Tensor& t, int64_t array_size) { return expand_members(t, array_size); }

// aten::lstm/gru/rnn_* for stacked members: input [B, T, N, I] (or
// [B, N, T, I] batch-first), h0 (and c0) [B|1, L*D, N, H], params as ATen
// orders them (per layer and direction: w_ih, w_hh, [b_ih, b_hh], [w_hr]),
// each [B, ...]. Returns the output, h_n and c_n (undefined but for LSTM).
std::tuple<at::Tensor, at::Tensor, at::Tensor> recurrent(Cell cell, const at::Tensor& input, const at::Tensor& h0,
                                                         const at::Tensor& c0, at::TensorList params, bool has_biases,
                                                         int64_t num_layers, double dropout, bool train,
                                                         bool bidirectional, bool batch_first) {
  TORCH_CHECK(input.dim() == 4, "hfta: a recurrent layer's input must be [B, T, N, I] or [B, N, T, I], got ",
              input.sizes());
  TORCH_CHECK(!params.empty(), "hfta: a recurrent layer without weights");
  const int64_t array_size = params[0].size(0);
  const int64_t directions = bidirectional ? 2 : 1;
  // ATen's rule: an LSTM projects its output when h and c differ in size.
  const bool projected = cell == Cell::Lstm && h0.size(-1) != c0.size(-1);
  const size_t per_direction = 2 + (has_biases ? 2 : 0) + (projected ? 1 : 0);
  TORCH_CHECK(params.size() == per_direction * num_layers * directions, "hfta: expected ",
              per_direction * num_layers * directions, " recurrent weights, got ", params.size());
  auto weightsAt = [&](int64_t layer, int64_t direction) {
    size_t i = per_direction * (layer * directions + direction);
    Weights w{params[i], params[i + 1]};
    i += 2;
    if (has_biases) {
      w.b_ih = params[i++];
      w.b_hh = params[i++];
    }
    if (projected) w.w_hr = params[i];
    return w;
  };
  const auto h_init = members(h0, array_size);
  const auto c_init = cell == Cell::Lstm ? members(c0, array_size) : at::Tensor();
  auto layer_input = members(batch_first ? input.transpose(1, 2) : input, array_size);
  std::vector<at::Tensor> h_last, c_last;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<at::Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const int64_t index = layer * directions + direction;
      State state{h_init.select(1, index), c_init.defined() ? c_init.select(1, index) : at::Tensor()};
      auto [output, last] = runDirection(cell, layer_input, state, weightsAt(layer, direction), direction == 1);
      outputs.push_back(output);
      h_last.push_back(last.h);
      if (last.c.defined()) c_last.push_back(last.c);
    }
    layer_input = directions == 1 ? outputs[0] : at::cat(outputs, -1);
    // Between layers, as ATen does; each member draws its own mask.
    if (dropout != 0 && train && layer < num_layers - 1) layer_input = at::dropout(layer_input, dropout, train);
  }
  auto output = batch_first ? layer_input.transpose(1, 2) : layer_input;
  return {output, at::stack(h_last, 1), c_last.empty() ? at::Tensor() : at::stack(c_last, 1)};
}

Weights cellWeights(const at::Tensor& w_ih, const at::Tensor& w_hh, const std::optional<at::Tensor>& b_ih,
                    const std::optional<at::Tensor>& b_hh) {
  return {w_ih, w_hh, b_ih.value_or(at::Tensor()), b_hh.value_or(at::Tensor())};
}

// One cell step for stacked members: input [B|1, N, I] (or [B|1, I]).
State cellStep(Cell cell, const at::Tensor& input, const State& state, const Weights& w) {
  const int64_t array_size = w.w_ih.size(0);
  const auto x_gates = hfta::ops::linear(members(input, array_size), w.w_ih, optional(w.b_ih));
  const State full{members(state.h, array_size), state.c.defined() ? members(state.c, array_size) : at::Tensor()};
  return step(cell, x_gates, full, w);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm(const at::Tensor& input, at::TensorList hx, at::TensorList params,
                                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                                    bool bidirectional, bool batch_first) {
  TORCH_CHECK(hx.size() == 2, "hfta::lstm: hx must be [h0, c0]");
  return recurrent(Cell::Lstm, input, hx[0], hx[1], params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first);
}

std::tuple<at::Tensor, at::Tensor> gru(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                       bool has_biases, int64_t num_layers, double dropout, bool train,
                                       bool bidirectional, bool batch_first) {
  auto [output, h, c] =
      recurrent(Cell::Gru, input, hx, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  return {output, h};
}

std::tuple<at::Tensor, at::Tensor> rnn_tanh(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout, bool train,
                                            bool bidirectional, bool batch_first) {
  auto [output, h, c] =
      recurrent(Cell::Tanh, input, hx, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  return {output, h};
}

std::tuple<at::Tensor, at::Tensor> rnn_relu(const at::Tensor& input, const at::Tensor& hx, at::TensorList params,
                                            bool has_biases, int64_t num_layers, double dropout, bool train,
                                            bool bidirectional, bool batch_first) {
  auto [output, h, c] =
      recurrent(Cell::Relu, input, hx, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  return {output, h};
}

std::tuple<at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input, at::TensorList hx, const at::Tensor& w_ih,
                                             const at::Tensor& w_hh, const std::optional<at::Tensor>& b_ih,
                                             const std::optional<at::Tensor>& b_hh) {
  TORCH_CHECK(hx.size() == 2, "hfta::lstm_cell: hx must be [h, c]");
  const auto next = cellStep(Cell::Lstm, input, {hx[0], hx[1]}, cellWeights(w_ih, w_hh, b_ih, b_hh));
  return {next.h, next.c};
}

at::Tensor gru_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                    const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh) {
  return cellStep(Cell::Gru, input, {hx, {}}, cellWeights(w_ih, w_hh, b_ih, b_hh)).h;
}

at::Tensor rnn_tanh_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                         const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh) {
  return cellStep(Cell::Tanh, input, {hx, {}}, cellWeights(w_ih, w_hh, b_ih, b_hh)).h;
}

at::Tensor rnn_relu_cell(const at::Tensor& input, const at::Tensor& hx, const at::Tensor& w_ih, const at::Tensor& w_hh,
                         const std::optional<at::Tensor>& b_ih, const std::optional<at::Tensor>& b_hh) {
  return cellStep(Cell::Relu, input, {hx, {}}, cellWeights(w_ih, w_hh, b_ih, b_hh)).h;
}

}  // namespace hfta::ops
