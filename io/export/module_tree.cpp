#include "io/export/module_tree.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include "support/user_error.h"

namespace hfta::exported {
namespace {

using nlohmann::json;
using torch::jit::Module;

// "torch.nn.modules.conv.Conv2d" for each module path, from the nodes'
// nn_module_stack ("L__self__,,__main__.Net;L__self___fc,fc,torch.nn...").
void collectClassNames(const json& graph, std::map<std::string, std::string>& names) {
  forEachNode(graph, [&](const json& node) {
    const auto metadata = node.find("metadata");
    if (metadata == node.end() || !metadata->contains("nn_module_stack")) return;
    std::stringstream stack(metadata->at("nn_module_stack").get<std::string>());
    std::string entry;
    while (std::getline(stack, entry, ';')) {
      const auto first = entry.find(','), second = entry.find(',', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      names.emplace(entry.substr(first + 1, second - first - 1), entry.substr(second + 1));
    }
  });
}

// The member's module tree, made on demand by qualified name.
class ModuleTree {
 public:
  explicit ModuleTree(std::map<std::string, std::string> class_names)
      : cu_(std::make_shared<torch::jit::CompilationUnit>()), class_names_(std::move(class_names)) {
    root_ = make("");
  }

  Module& root() { return root_; }

  // The module at `path` ("" for the root, "layer1.0"), made with its
  // parents if new.
  Module at(const std::string& path) {
    if (path.empty()) return root_;
    const auto dot = path.rfind('.');
    Module parent = at(dot == std::string::npos ? "" : path.substr(0, dot));
    const std::string name = path.substr(dot == std::string::npos ? 0 : dot + 1);
    if (auto existing = parent.attr(name, c10::IValue()); existing.isModule()) return existing.toModule();
    Module child = make(path);
    parent.register_module(name, child);
    return child;
  }

  // Registers `tensor` at a qualified name ("fc.weight").
  void addTensor(const std::string& qualified, const at::Tensor& tensor, bool is_parameter, bool is_buffer) {
    const auto dot = qualified.rfind('.');
    Module owner = at(dot == std::string::npos ? "" : qualified.substr(0, dot));
    const std::string name = qualified.substr(dot == std::string::npos ? 0 : dot + 1);
    if (owner.hasattr(name)) return;
    owner.register_attribute(name, c10::TensorType::get(), tensor, is_parameter, is_buffer);
  }

 private:
  Module make(const std::string& path) {
    auto it = class_names_.find(path);
    std::string type = it == class_names_.end() ? "Module" : it->second;
    if (type.rfind("__main__.", 0) == 0) type = type.substr(9);
    Module m(c10::QualifiedName("__torch__." + type), cu_, /*shouldMangle=*/true);
    m.register_attribute("training", c10::BoolType::get(), true);
    return m;
  }

  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  std::map<std::string, std::string> class_names_;
  Module root_;
};

// The tensors of the program serving first, registered under their names;
// the other program must hold the same tensors.
void addTensors(ModuleTree& tree, const Program& program, const Program* other, const std::string& label) {
  std::set<std::string> parameters, buffers;
  for (const auto& spec : signature(program).at("input_specs")) {
    if (spec.contains("parameter")) parameters.insert(spec.at("parameter").at("parameter_name").get<std::string>());
    if (spec.contains("buffer")) buffers.insert(spec.at("buffer").at("buffer_name").get<std::string>());
  }
  // Parameters first, then buffers: named_parameters() and named_buffers()
  // order, as in the exported module.
  for (const bool want_parameters : {true, false}) {
    for (const auto& spec : signature(program).at("input_specs")) {
      const char* kind = want_parameters ? "parameter" : "buffer";
      if (!spec.contains(kind)) continue;
      const auto name = spec.at(kind).at(want_parameters ? "parameter_name" : "buffer_name").get<std::string>();
      // A non-persistent buffer is stored with the constants.
      const auto* stored = &program.weights;
      if (!stored->count(name)) stored = &program.constants;
      const auto it = stored->find(name);
      if (it == stored->end()) {
        throw UserError(
            fmt::format("{}: program `{}` has no tensor for `{}` (a damaged archive?). Save it again "
                        "with torch.export.save",
                        label, program.name, name));
      }
      tree.addTensor(name, it->second, want_parameters, !want_parameters);
    }
  }
  // Tensors the signature does not name: a tied weight's other names.
  for (const auto& [name, tensor] : program.weights) {
    if (!parameters.count(name) && !buffers.count(name)) tree.addTensor(name, tensor, tensor.requires_grad(), false);
  }
  for (const auto& [name, tensor] : program.constants) {
    if (!buffers.count(name) && !isLiftedConstant(name)) tree.addTensor(name, tensor, false, false);
  }
  if (!other || other == &program) return;
  for (const auto& [name, tensor] : other->weights) {
    const auto it = program.weights.find(name);
    if (it == program.weights.end() || !it->second.sizes().equals(tensor.sizes()) ||
        it->second.scalar_type() != tensor.scalar_type() || !at::equal(it->second, tensor)) {
      throw UserError(
          fmt::format("{}: programs `{}` and `{}` hold different values of `{}`; export both modes "
                      "of the same model (hfta.export)",
                      label, program.name, other->name, name));
    }
  }
}

}  // namespace

bool isLiftedConstant(const std::string& name) {
  const auto dot = name.rfind('.');
  return name.compare(dot == std::string::npos ? 0 : dot + 1, 13, "lifted_tensor") == 0;
}

Module moduleTree(const Program& first, const Program* other, const std::string& label) {
  std::map<std::string, std::string> class_names;
  for (const Program* p : {&first, other}) {
    if (p) collectClassNames(graphModule(*p).at("graph"), class_names);
  }
  ModuleTree tree(class_names);
  for (const auto& call : graphModule(first).at("module_call_graph")) {
    const auto fqn = call.at("fqn").get<std::string>();
    if (!fqn.empty() && fqn.find('@') == std::string::npos) tree.at(fqn);  // fc@1: a second call of fc
  }
  addTensors(tree, first, other, label);
  return tree.root();
}

}  // namespace hfta::exported
