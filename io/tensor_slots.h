#pragma once
// The tensors a module holds, by qualified name: parameters, buffers, plain
// tensor attributes and the elements of tensor-list attributes (nn.LSTM's
// _flat_weights; they are the parameters again). One tensor may sit in
// several slots: a tied weight (head.weight = tok.weight), a module reused
// in two places, a list of parameters. Fusing and splitting must keep
// such a tensor one tensor, or each name would train on its own.
#include <torch/script.h>

#include <map>
#include <string>
#include <vector>

namespace hfta {

struct TensorSlot {
  std::string name;  // e.g. head.weight; a list element is lstm._flat_weights.0
  at::Tensor tensor;
};

// Every tensor slot of `module` and its submodules, in slot order.
std::vector<TensorSlot> tensorSlots(const torch::jit::Module& module);

// For each slot whose tensor also sits in an earlier slot: its name -> the
// first slot's name. Slots of a tensor held once are not in the map.
std::map<std::string, std::string> tiedSlots(const std::vector<TensorSlot>& slots);

// The module's parameters, each tensor once (a tied weight is one
// parameter: an optimizer steps it once and its gradient is the sum of its
// uses), under the name of their first slot, in that order: what Python's
// named_parameters() gives.
std::vector<torch::jit::NameTensor> distinctNamedParameters(const torch::jit::Module& module);
std::vector<at::Tensor> distinctParameters(const torch::jit::Module& module);
// Its buffers likewise.
std::vector<at::Tensor> distinctBuffers(const torch::jit::Module& module);

}  // namespace hfta
