#include "io/tensor_slots.h"

#include <unordered_map>
#include <unordered_set>

namespace hfta {
namespace {

void collect(const torch::jit::Module& module, const std::string& prefix, std::vector<TensorSlot>& out) {
  const auto type = module.type();
  for (size_t slot = 0; slot < type->numAttributes(); ++slot) {
    const auto name = prefix + type->getAttributeName(slot);
    const auto value = module._ivalue()->getSlot(slot);
    if (value.isModule()) {
      collect(value.toModule(), name + ".", out);
    } else if (value.isTensor()) {
      out.push_back({name, value.toTensor()});
    } else if (value.isTensorList()) {
      const auto list = value.toTensorList();
      for (size_t i = 0; i < list.size(); ++i) out.push_back({name + "." + std::to_string(i), list.get(i)});
    }
  }
}

template <typename Named>
std::vector<torch::jit::NameTensor> distinct(const Named& named) {
  std::vector<torch::jit::NameTensor> out;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : named) {
    if (seen.insert(item.value.unsafeGetTensorImpl()).second) out.push_back({item.name, item.value});
  }
  return out;
}

std::vector<at::Tensor> valuesOf(const std::vector<torch::jit::NameTensor>& named) {
  std::vector<at::Tensor> out;
  for (const auto& item : named) out.push_back(item.value);
  return out;
}

}  // namespace

std::vector<TensorSlot> tensorSlots(const torch::jit::Module& module) {
  std::vector<TensorSlot> out;
  collect(module, "", out);
  return out;
}

std::map<std::string, std::string> tiedSlots(const std::vector<TensorSlot>& slots) {
  std::unordered_map<const c10::TensorImpl*, std::string> first;
  std::map<std::string, std::string> tied;
  for (const auto& slot : slots) {
    if (!slot.tensor.defined()) continue;
    const auto [it, fresh] = first.emplace(slot.tensor.unsafeGetTensorImpl(), slot.name);
    if (!fresh) tied[slot.name] = it->second;
  }
  return tied;
}

std::vector<torch::jit::NameTensor> distinctNamedParameters(const torch::jit::Module& module) {
  return distinct(module.named_parameters());
}

std::vector<at::Tensor> distinctParameters(const torch::jit::Module& module) {
  return valuesOf(distinctNamedParameters(module));
}

std::vector<at::Tensor> distinctBuffers(const torch::jit::Module& module) {
  return valuesOf(distinct(module.named_buffers()));
}

}  // namespace hfta
