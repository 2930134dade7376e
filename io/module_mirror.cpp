#include "io/module_mirror.h"

#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>

#include "support/torch_types.h"
#include "support/user_error.h"

namespace hfta {

torch::jit::Module mirror(const torch::jit::Module& source, const std::shared_ptr<torch::jit::CompilationUnit>& cu,
                          ClassMap& classes, const std::function<std::string(const std::string&)>& class_name,
                          TensorMemo& tensors, bool is_root) {
  const auto src_type = source.type();
  auto known = classes.find(src_type);
  torch::jit::Module out =
      known != classes.end() ? torch::jit::Module(cu, known->second)
                             : torch::jit::Module(c10::QualifiedName(class_name(src_type->name()->qualifiedName())), cu,
                                                  /*shouldMangle=*/true);
  classes.emplace(src_type, out.type());
  for (size_t slot = 0; slot < src_type->numAttributes(); ++slot) {
    const auto name = src_type->getAttributeName(slot);
    if (is_root && name.rfind("hfta_", 0) == 0) continue;  // a fused module's own record
    const auto type = src_type->getAttribute(slot);
    const auto value = source._ivalue()->getSlot(slot);
    const bool is_parameter = src_type->is_parameter(slot), is_buffer = src_type->is_buffer(slot);
    if (value.isModule()) {
      out.register_module(name, mirror(value.toModule(), cu, classes, class_name, tensors, false));
    } else if (value.isTensor()) {
      out.register_attribute(name, type, tensors(value.toTensor()), is_parameter, is_buffer);
    } else if (value.isTensorList()) {
      // nn.LSTM's _flat_weights (its parameters again), a user's List[Tensor].
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(tensors(t));
      out.register_attribute(name, type, list, is_parameter, is_buffer);
    } else {
      // None in an Optional[Tensor] slot (a conv without bias) is the same in
      // every member (lockstep matching checked it).
      if (containsTensor(type) && !value.isNone()) {
        throw UserError(
            fmt::format("attribute `{}` of {} holds tensors inside a {}; hfta fuses tensors, lists of tensors, "
                        "parameters and buffers. Store the tensors as separate buffers or in a List[Tensor].",
                        name, src_type->name()->qualifiedName(), type->annotation_str()));
      }
      out.register_attribute(name, type, value, is_parameter, is_buffer);
    }
  }
  return out;
}

void retypeGraph(torch::jit::Graph& graph, const ClassMap& classes) {
  auto retype = [&](torch::jit::Value* v) {
    if (auto cls = v->type()->cast<c10::ClassType>()) {
      auto it = classes.find(cls);
      if (it != classes.end()) v->setType(it->second);
    }
  };
  for (auto* v : graph.inputs()) retype(v);
  auto shared = graph.shared_from_this();
  torch::jit::DepthFirstGraphNodeIterator nodes(shared);
  while (torch::jit::Node* node = nodes.next()) {
    for (auto* v : node->outputs()) retype(v);
    for (auto* inner : node->blocks()) {
      for (auto* v : inner->inputs()) retype(v);
    }
  }
}

void addMethod(torch::jit::Module& module, const std::string& name, const std::shared_ptr<torch::jit::Graph>& graph) {
  auto* fn =
      module._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*module.type()->name(), name), graph);
  module.type()->addMethod(fn);
}

}  // namespace hfta
