#pragma once
// The parts of hfta._C, each binding one library's interface.
#include <pybind11/pybind11.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/optim/member_state.h"

namespace hfta::python {

// A C++ state dict as bytes in torch.save's format, and back: bytes keep
// its lists' TorchScript element types, which Python objects would lose.
inline pybind11::bytes pickled(const c10::IValue& state) {
  const auto bytes = torch::pickle_save(state);
  return {bytes.data(), bytes.size()};
}
inline c10::IValue unpickled(const std::string& bytes) {
  return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
}
// (state bytes, member) pairs from Python as runtime/optim's picks, for the
// gather_state_dicts of optimizers and schedulers (hfta.take).
inline std::vector<MemberOfState> memberStates(const std::vector<std::pair<std::string, int64_t>>& picks) {
  std::vector<MemberOfState> members;
  for (const auto& [state, member] : picks) members.push_back({unpickled(state), member});
  return members;
}

void bindFusion(pybind11::module_& m);      // hfta.fuse, split, ...
void bindOptim(pybind11::module_& m);       // the fused optimizers behind hfta.optim
void bindSchedulers(pybind11::module_& m);  // the schedulers behind hfta.optim.lr_scheduler
void bindGradScaler(pybind11::module_& m);  // the loss scaler behind hfta.amp.GradScaler

}  // namespace hfta::python
