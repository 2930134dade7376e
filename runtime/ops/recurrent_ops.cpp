// Recurrent layers over B members' stacked weights: nn.LSTM, nn.GRU and
// nn.RNN (aten::lstm, gru, rnn_tanh, rnn_relu) and their cells, in two
// forms the autotuner chooses between per shape. Stepped runs every member
// at once at each step: the input projection of all time steps is one
// batched GEMM per layer and direction, the recurrence one per time step,
// the gates element-wise over [B, N, gates] (an unprojected LSTM in
// float32 or float64 through lstm_steps.cpp, one autograd node per layer
// and direction; the others op by op). The arithmetic follows ATen's
// CPU cells (aten/src/ATen/native/RNN.cpp: gates = linear_hh(h) + the
// precomputed linear_ih(x); LSTM's i, f, g, o and GRU's r, z, n chunks), so
// a member computes what it computes alone up to the GEMMs' rounding (and
// the rounding of lstm_steps.cpp's sigmoid and tanh).
// PerMember runs each member's own ATen op on its slices (on the CPU,
// oneDNN's LSTM kernel, which stepping loses to: bench/RESULTS.md). The
// cells run stepped only.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>

#include "runtime/ops/autotune.h"
#include "runtime/ops/lstm_steps.h"
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
  const auto x_gates = hfta::ops::linear(x, w.w_ih, optional(w.b_ih));  // every step's at once
  if (cell == Cell::Lstm && !w.w_hr.defined() && lstmStepsApplies(x_gates, state.h, state.c, w.w_hh, w.b_hh)) {
    auto [output, h, c] = lstmSteps(x_gates, state.h, state.c, w.w_hh, w.b_hh, reverse);
    return {output, {h, c}};
  }
  // One view per step: unbind, whose backward is one stack (a select per
  // step would zero-fill the whole gradient once per step in backward, as
  // many times as there are steps).
  const auto x_steps = x_gates.unbind(1);
  const int64_t steps = x.size(1);
  std::vector<at::Tensor> outputs(steps);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    state = step(cell, x_steps[t], state, w);
    outputs[t] = state.h;
  }
  return {at::stack(outputs, 1), state};
}

// The members' [B|1, ...] value as [B, ...].
at::Tensor members(const at::Tensor& t, int64_t array_size) { return expand_members(t, array_size); }

// What an aten::lstm/gru/rnn_* call says of its layers, beyond its tensors.
struct Layers {
  Cell cell;
  bool has_biases;
  int64_t count;
  int64_t directions;
  bool projected;  // an LSTM with proj_size: h and c differ in size
  bool train;
  // Weights per layer and direction: w_ih, w_hh, [b_ih, b_hh], [w_hr].
  size_t perDirection() const { return 2 + (has_biases ? 2 : 0) + (projected ? 1 : 0); }
};

// The outputs of a stacked recurrent layer: output [B, T, N, D*H]
// (time-major), h_n and c_n [B, L*D, N, H] (c_n undefined but for LSTM).
struct Outputs {
  at::Tensor output, h_n, c_n;
};

// Dropout between layers, as ATen applies it but with the runtime's dropout
// (dropout_ops.cpp): over the stacked layer output [B, T, N, D*H] in one
// draw, each member its own slice of the mask.
// Both forms call it on the same contiguous tensor shape at the same point,
// so which form runs changes no random number.
at::Tensor dropoutBetweenLayers(const at::Tensor& layer_output, double dropout, bool train) {
  return dropout != 0 && train ? ops::dropout(layer_output, dropout, train) : layer_output;
}

// Every member at each time step: batched GEMMs and the gates over
// [B, N, gates] (runDirection). x: [B, T, N, I]; h0, c0: [B, L*D, N, H].
Outputs steppedForm(const Layers& layers, const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                    at::TensorList params, double dropout) {
  const size_t per_direction = layers.perDirection();
  auto weightsAt = [&](int64_t layer, int64_t direction) {
    size_t i = per_direction * (layer * layers.directions + direction);
    Weights w{params[i], params[i + 1]};
    i += 2;
    if (layers.has_biases) {
      w.b_ih = params[i++];
      w.b_hh = params[i++];
    }
    if (layers.projected) w.w_hr = params[i];
    return w;
  };
  auto layer_input = x;
  std::vector<at::Tensor> h_last, c_last;
  for (int64_t layer = 0; layer < layers.count; ++layer) {
    std::vector<at::Tensor> outputs;
    for (int64_t direction = 0; direction < layers.directions; ++direction) {
      const int64_t index = layer * layers.directions + direction;
      State state{h0.select(1, index), c0.defined() ? c0.select(1, index) : at::Tensor()};
      auto [output, last] = runDirection(layers.cell, layer_input, state, weightsAt(layer, direction), direction == 1);
      outputs.push_back(output);
      h_last.push_back(last.h);
      if (last.c.defined()) c_last.push_back(last.c);
    }
    layer_input = layers.directions == 1 ? outputs[0] : at::cat(outputs, -1);
    if (layer < layers.count - 1) layer_input = dropoutBetweenLayers(layer_input, dropout, layers.train);
  }
  return {layer_input, at::stack(h_last, 1), c_last.empty() ? at::Tensor() : at::stack(c_last, 1)};
}

// One member's layers [first, first + count) through ATen's own op
// (oneDNN's kernel on CPU where it applies): x [T, N, I], h and c
// [count*D, N, H], params that run's weights; no dropout inside.
std::tuple<at::Tensor, at::Tensor, at::Tensor> memberLayers(const Layers& layers, const at::Tensor& x,
                                                            const at::Tensor& h, const at::Tensor& c,
                                                            at::TensorList params, int64_t count) {
  const bool bidirectional = layers.directions == 2;
  switch (layers.cell) {
    case Cell::Lstm:
      return at::lstm(x, {h, c}, params, layers.has_biases, count, 0.0, layers.train, bidirectional, false);
    case Cell::Gru: {
      auto [y, h_n] = at::gru(x, h, params, layers.has_biases, count, 0.0, layers.train, bidirectional, false);
      return {y, h_n, at::Tensor()};
    }
    case Cell::Tanh: {
      auto [y, h_n] = at::rnn_tanh(x, h, params, layers.has_biases, count, 0.0, layers.train, bidirectional, false);
      return {y, h_n, at::Tensor()};
    }
    case Cell::Relu: {
      auto [y, h_n] = at::rnn_relu(x, h, params, layers.has_biases, count, 0.0, layers.train, bidirectional, false);
      return {y, h_n, at::Tensor()};
    }
  }
  TORCH_INTERNAL_ASSERT(false, "hfta: unknown recurrent cell");
}

// The members one after another, each through ATen's own recurrent op on
// its slices, as it runs alone. Layers run together per member up to each
// point where dropout applies; there the members' outputs are stacked and
// dropped out as in the stepped form (dropoutBetweenLayers), then unbound
// again. With `split_layers`, one layer per call even where no dropout
// applies (how the race times a layer whose dropout it leaves out).
Outputs perMemberForm(const Layers& layers, const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                      at::TensorList params, double dropout, bool split_layers) {
  const int64_t array_size = x.size(0);
  // unbind, not select: its backward is one stack, where B selects would
  // each zero-fill a whole-sized gradient.
  std::vector<std::vector<at::Tensor>> member_params(array_size);
  for (const auto& p : params) {
    const auto slices = p.unbind(0);
    for (int64_t m = 0; m < array_size; ++m) member_params[m].push_back(slices[m]);
  }
  const auto h_members = h0.unbind(0);
  const auto c_members = c0.defined() ? c0.unbind(0) : std::vector<at::Tensor>(array_size);
  const int64_t run_length = split_layers ? 1 : layers.count;
  const auto weights_per_layer = static_cast<int64_t>(layers.perDirection()) * layers.directions;
  auto layer_input = x;
  std::vector<std::vector<at::Tensor>> h_runs(array_size), c_runs(array_size);
  for (int64_t first = 0; first < layers.count; first += run_length) {
    const int64_t count = std::min(run_length, layers.count - first);
    const auto inputs = layer_input.unbind(0);
    std::vector<at::Tensor> outputs;
    for (int64_t m = 0; m < array_size; ++m) {
      const auto state = [&](const at::Tensor& t) {
        return t.defined() ? t.narrow(0, first * layers.directions, count * layers.directions) : t;
      };
      const auto run_params =
          at::TensorList(member_params[m]).slice(first * weights_per_layer, count * weights_per_layer);
      auto [y, h_n, c_n] = memberLayers(layers, inputs[m], state(h_members[m]), state(c_members[m]), run_params, count);
      outputs.push_back(y);
      h_runs[m].push_back(h_n);
      if (c_n.defined()) c_runs[m].push_back(c_n);
    }
    layer_input = at::stack(outputs);
    if (first + count < layers.count) layer_input = dropoutBetweenLayers(layer_input, dropout, layers.train);
  }
  std::vector<at::Tensor> h_n, c_n;
  for (int64_t m = 0; m < array_size; ++m) {
    h_n.push_back(at::cat(h_runs[m]));
    if (!c_runs[m].empty()) c_n.push_back(at::cat(c_runs[m]));
  }
  return {layer_input, at::stack(h_n), c_n.empty() ? at::Tensor() : at::stack(c_n)};
}

std::atomic<RecurrentForm> forced_recurrent_form{RecurrentForm::Chosen};

Outputs runForm(RecurrentForm form, const Layers& layers, const at::Tensor& x, const at::Tensor& h0,
                const at::Tensor& c0, at::TensorList params, double dropout, bool split_layers) {
  return form == RecurrentForm::PerMember ? perMemberForm(layers, x, h0, c0, params, dropout, split_layers)
                                          : steppedForm(layers, x, h0, c0, params, dropout);
}

// As forced, else on CPU the faster form measured here for these shapes
// (forward and, where gradients are on, backward), else Stepped, the form
// that came first. CUDA keeps Stepped: cuDNN would copy the members'
// unflattened weights on every call (and warn), not measured yet.
RecurrentForm chooseForm(const Layers& layers, const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0,
                         at::TensorList params, bool split_layers) {
  const auto forced = forced_recurrent_form.load();
  if (forced != RecurrentForm::Chosen) return forced;
  if (!autotune::enabled() || !x.device().is_cpu()) return RecurrentForm::Stepped;
  const bool backward = autotune::recordsGradients();
  static const std::vector<RecurrentForm> forms{RecurrentForm::Stepped, RecurrentForm::PerMember};
  static autotune::Memo memo;
  autotune::Memo::Signature signature{
      backward,    static_cast<int64_t>(layers.cell), layers.has_biases, layers.count, layers.directions, layers.train,
      split_layers};
  for (const auto& t : {x, h0, c0, params[0], params[1]}) autotune::appendTensor(signature, t);
  if (layers.projected) autotune::appendTensor(signature, params[layers.perDirection() - 1]);
  const auto key = [&] {
    static const char* names[] = {"lstm", "gru", "rnn_tanh", "rnn_relu"};
    return fmt::format(
        "hfta::{}|in [{}]|h [{}]|c [{}]|w_ih [{}]|w_hh [{}]|layers {}|directions {}|biases {}|proj {}|train {}|"
        "split {}|{}|{}|{}|forms stepped,per-member|{}",
        names[static_cast<int>(layers.cell)], fmt::join(x.sizes(), ","), fmt::join(h0.sizes(), ","),
        c0.defined() ? fmt::format("{}", fmt::join(c0.sizes(), ",")) : "", fmt::join(params[0].sizes(), ","),
        fmt::join(params[1].sizes(), ","), layers.count, layers.directions, layers.has_biases, layers.projected,
        layers.train, split_layers, c10::toString(x.scalar_type()), x.device().str(),
        backward ? "forward+backward" : "forward", autotune::machine(x.device()));
  };
  const auto candidates = [&] {
    std::vector<at::Tensor> tensors{x, h0, c0};
    tensors.insert(tensors.end(), params.begin(), params.end());
    std::vector<std::function<void()>> runs;
    for (const auto form : forms) {
      // Without dropout: the race must draw no random number (how often
      // it runs depends on timing), and both forms drop out alike.
      runs.push_back(autotune::candidate(tensors, backward, [=](const std::vector<at::Tensor>& t) {
        const std::vector<at::Tensor> weights(t.begin() + 3, t.end());
        return runForm(form, layers, t[0], t[1], t[2], weights, 0.0, split_layers).output;
      }));
    }
    return runs;
  };
  return forms[memo.choose(signature, 0, key, candidates)];
}

// aten::lstm/gru/rnn_* for stacked members: input [B|1, T, N, I] (or
// [B|1, N, T, I] batch-first), h0 (and c0) [B|1, L*D, N, H], params as ATen
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
  // ATen's rule: an LSTM projects its output when h and c differ in size.
  const bool projected = cell == Cell::Lstm && h0.size(-1) != c0.size(-1);
  const Layers layers{cell, has_biases, num_layers, bidirectional ? 2 : 1, projected, train};
  const size_t expected = layers.perDirection() * num_layers * layers.directions;
  TORCH_CHECK(params.size() == expected, "hfta: expected ", expected, " recurrent weights, got ", params.size());
  const auto x = members(batch_first ? input.transpose(1, 2) : input, array_size);
  const auto h_init = members(h0, array_size);
  const auto c_init = cell == Cell::Lstm ? members(c0, array_size) : at::Tensor();
  const bool split_layers = dropout != 0 && train;
  const auto form = chooseForm(layers, x, h_init, c_init, params, split_layers);
  const auto [output, h_n, c_n] = runForm(form, layers, x, h_init, c_init, params, dropout, split_layers);
  return {batch_first ? output.transpose(1, 2) : output, h_n, c_n};
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

RecurrentForm recurrentForm() { return forced_recurrent_form.load(); }
void setRecurrentForm(RecurrentForm form) { forced_recurrent_form = form; }

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
