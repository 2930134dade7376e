#include "io/export/exported_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "io/export/graph_translation.h"
#include "io/export/program_mode.h"
#include "io/export/schema_enums.h"
#include "io/module_mirror.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using nlohmann::json;
using torch::jit::Graph;
using torch::jit::Module;
using torch::jit::Value;

const json& graphModule(const Program& p) { return p.exported.at("graph_module"); }
const json& signature(const Program& p) { return graphModule(p).at("signature"); }

// "features.1.attn.lifted_tensor_0": a tensor the forward's code made.
bool isLiftedConstant(const std::string& name) {
  const auto dot = name.rfind('.');
  return name.compare(dot == std::string::npos ? 0 : dot + 1, 13, "lifted_tensor") == 0;
}

// The programs serving train() and eval() (the same one when it serves
// both; null when none does).
struct ModePrograms {
  const Program* training = nullptr;
  const Program* evaluation = nullptr;
};

ModePrograms choosePrograms(const std::vector<Program>& programs, const std::string& label) {
  if (programs.size() == 1 && programs[0].name != "train" && programs[0].name != "eval") {
    const auto& only = programs[0];
    switch (recordedMode(only, label)) {
      case Mode::Training:
        return {&only, nullptr};
      case Mode::Evaluation:
        return {nullptr, &only};
      case Mode::Either:
        return {&only, &only};
    }
  }
  ModePrograms chosen;
  std::vector<std::string> names;
  for (const auto& p : programs) {
    names.push_back(p.name);
    const Mode wanted = p.name == "train" ? Mode::Training : Mode::Evaluation;
    if (p.name != "train" && p.name != "eval") continue;
    const Mode recorded = recordedMode(p, label);
    if (recorded != Mode::Either && recorded != wanted) {
      throw UserError(fmt::format("{}: program `{}` records {} mode. Export it after model.{}()", label, p.name,
                                  modeName(recorded), p.name));
    }
    (p.name == "train" ? chosen.training : chosen.evaluation) = &p;
  }
  if (!chosen.training && !chosen.evaluation) {
    throw UserError(
        fmt::format("{} holds the programs {}; hfta reads one program (torch.export.save) or the "
                    "programs `train` and `eval` (hfta.export)",
                    label, fmt::join(names, ", ")));
  }
  return chosen;
}

// "torch.nn.modules.conv.Conv2d" for each module path, from the nodes'
// nn_module_stack ("L__self__,,__main__.Net;L__self___fc,fc,torch.nn...").
void collectClassNames(const json& graph, std::map<std::string, std::string>& names) {
  for (const auto& node : graph.at("nodes")) {
    const auto metadata = node.find("metadata");
    if (metadata != node.end() && metadata->contains("nn_module_stack")) {
      std::stringstream stack(metadata->at("nn_module_stack").get<std::string>());
      std::string entry;
      while (std::getline(stack, entry, ';')) {
        const auto first = entry.find(','), second = entry.find(',', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        names.emplace(entry.substr(first + 1, second - first - 1), entry.substr(second + 1));
      }
    }
    for (const auto& in : node.at("inputs")) {
      if (in.at("arg").contains("as_graph")) collectClassNames(in.at("arg").at("as_graph").at("graph"), names);
    }
  }
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

// The forward's graph under construction: self, the user's inputs, the
// module's tensors read once each by qualified name.
class ForwardBuilder {
 public:
  ForwardBuilder(Module root, const std::string& label) : root_(std::move(root)), label_(label) {
    graph_ = std::make_shared<Graph>();
    self_ = graph_->addInput("self")->setType(root_.type());
  }

  std::shared_ptr<Graph> graph() const { return graph_; }

  // The graph's inputs, typed from the user inputs of `program`.
  void addInputs(const Program& program) {
    for (const auto& spec : signature(program).at("input_specs")) {
      if (!spec.contains("user_input")) continue;
      const auto& arg = spec.at("user_input").at("arg");
      const auto kind = arg.begin().key();
      c10::TypePtr type;
      std::string name;
      if (kind == "as_tensor") {
        type = c10::TensorType::get();
        name = arg.at("as_tensor").at("name");
      } else if (kind == "as_sym_int" || kind == "as_int") {
        type = c10::IntType::get();
        name = kind == "as_sym_int" ? arg.at("as_sym_int").value("as_name", "") : "";
      } else {
        throw UserError(
            fmt::format("{}: program `{}` takes an input of kind `{}`; hfta fuses forwards that take "
                        "tensors and ints",
                        label_, program.name, kind));
      }
      Value* input = graph_->addInput()->setType(type);
      if (!name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])))
        input->setDebugName(name);  // a Python name
      inputs_.push_back(input);
    }
  }

  // The user's outputs of `program` (its other outputs, buffers it
  // mutates, written back here), emitted at the insertion point.
  std::vector<Value*> emitProgram(const Program& program) {
    const auto& sig = signature(program);
    const auto& graph = graphModule(program).at("graph");
    Environment env;
    TranslationSite site{label_ + ", program `" + program.name + "`"};
    size_t next_input = 0;
    for (const auto& spec : sig.at("input_specs")) {
      const auto kind = spec.begin().key();
      const auto& s = spec.begin().value();
      if (kind == "parameter")
        env[s.at("arg").at("name")] = attribute(s.at("parameter_name"));
      else if (kind == "buffer")
        env[s.at("arg").at("name")] = attribute(s.at("buffer_name"));
      else if (kind == "tensor_constant")
        env[s.at("arg").at("name")] = tensorConstant(program, s.at("tensor_constant_name"));
      else if (kind == "constant_input")
        env[s.at("name")] = constantInput(s.at("value"));
      else if (kind == "user_input") {
        if (next_input >= inputs_.size())
          throw UserError(fmt::format("{}: the programs take different inputs", site.label));
        Value* input = inputs_[next_input++];
        const auto& arg = s.at("arg");
        const auto arg_kind = arg.begin().key();
        if (arg_kind == "as_tensor") {
          const auto name = arg.at("as_tensor").at("name").get<std::string>();
          env[name] = input;
          if (!site.device_of) {
            site.device_of = input;
            site.exported_device = deviceOf(graph.at("tensor_values").at(name).at("device"));
          }
        } else if (arg_kind == "as_sym_int" && arg.at("as_sym_int").contains("as_name")) {
          env[arg.at("as_sym_int").at("as_name")] = input;
        }
      } else {
        throw UserError(
            fmt::format("{} takes a {} input; hfta fuses programs whose inputs are parameters, "
                        "buffers, constants and the user's inputs",
                        site.label, kind));
      }
    }
    const auto outputs = emitGraph(*graph_, graph, env, site);
    const auto& specs = sig.at("output_specs");
    std::vector<Value*> user;
    for (size_t i = 0; i < specs.size() && i < outputs.size(); ++i) {
      const auto kind = specs[i].begin().key();
      const auto& s = specs[i].begin().value();
      if (kind == "user_output" || kind == "loss_output") {
        user.push_back(outputs[i]);
      } else if (kind == "buffer_mutation") {
        graph_->insert(c10::aten::copy_, {attribute(s.at("buffer_name")), outputs[i]});
      } else if (kind == "user_input_mutation") {
        graph_->insert(c10::aten::copy_, {env.at(s.at("user_input_name").get<std::string>()), outputs[i]});
      } else {
        throw UserError(
            fmt::format("{} has a {} output; hfta fuses the forward programs torch.export.export "
                        "returns (not joint or functionalized training graphs)",
                        site.label, kind));
      }
    }
    return user;
  }

 private:
  Value* attribute(const std::string& qualified) {
    auto it = attributes_.find(qualified);
    if (it != attributes_.end()) return it->second;
    torch::jit::WithInsertPoint top(graph_->block()->nodes().front());
    Value* owner = self_;
    Module module = root_;
    std::stringstream path(qualified);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(path, part, '.')) parts.push_back(part);
    for (size_t i = 0; i < parts.size(); ++i) {
      const bool last = i + 1 == parts.size();
      if (!module.hasattr(parts[i])) {
        throw UserError(
            fmt::format("{}: the program reads `{}`, which the archive holds no tensor for", label_, qualified));
      }
      c10::TypePtr type = last ? c10::TypePtr(c10::TensorType::get()) : module.attr(parts[i]).toModule().type();
      owner = graph_->insertGetAttr(owner, parts[i])->setType(type);
      if (!last) module = module.attr(parts[i]).toModule();
    }
    return attributes_[qualified] = owner;
  }

  // A tensor the forward's code made (torch.tensor(count): export lifts it
  // as `lifted_tensor_N`) is a constant of the graph, the same in every
  // member, as TorchScript keeps it; a module's own tensor attribute is
  // read from the module (its value may differ per member).
  Value* tensorConstant(const Program& program, const std::string& name) {
    if (!isLiftedConstant(name)) return attribute(name);
    auto it = lifted_.find(name);
    if (it != lifted_.end()) return it->second;
    torch::jit::WithInsertPoint top(graph_->block()->nodes().front());
    return lifted_[name] = graph_->insertConstant(program.constants.at(name));
  }

  Value* constantInput(const json& value) {
    const auto kind = value.begin().key();
    const auto& v = value.begin().value();
    if (kind == "as_int") return graph_->insertConstant(v.get<int64_t>());
    if (kind == "as_float") return graph_->insertConstant(floatOf(v));
    if (kind == "as_bool") return graph_->insertConstant(v.get<bool>());
    if (kind == "as_string") return graph_->insertConstant(v.get<std::string>());
    return graph_->insertNode(graph_->createNone())->output();
  }

  Module root_;
  std::string label_;
  std::shared_ptr<Graph> graph_;
  Value* self_;
  std::vector<Value*> inputs_;
  std::map<std::string, Value*> attributes_;
  std::map<std::string, Value*> lifted_;
};

// The forward's result from the flat user outputs, shaped as the exported
// forward returned them: its out_spec (a pytree spec: a leaf, tuples and
// lists of leaves).
class OutputShape {
 public:
  OutputShape(const Program& program, const std::string& label) : label_(label) {
    const auto& calls = graphModule(program).at("module_call_graph");
    if (calls.empty() || calls[0].at("signature").is_null()) {
      spec_ = json{{"type", nullptr}, {"children_spec", json::array()}};
      return;
    }
    spec_ = json::parse(calls[0].at("signature").at("out_spec").get<std::string>()).at(1);
  }

  bool operator==(const OutputShape& other) const { return spec_ == other.spec_; }

  // "a tensor", "a tuple of 3": for messages.
  std::string describe() const {
    if (spec_.at("type").is_null()) return "a tensor";
    return fmt::format("a {} of {}", spec_.at("type").get<std::string>(), spec_.at("children_spec").size());
  }

  Value* build(Graph& graph, const std::vector<Value*>& leaves) const {
    size_t next = 0;
    Value* out = build(graph, spec_, leaves, next);
    if (next != leaves.size())
      throw UserError(fmt::format("{}: the program's outputs do not match its out_spec", label_));
    return out;
  }

 private:
  Value* build(Graph& graph, const json& spec, const std::vector<Value*>& leaves, size_t& next) const {
    const auto& type = spec.at("type");
    if (type.is_null()) {
      if (next >= leaves.size())
        throw UserError(fmt::format("{}: the program's outputs do not match its out_spec", label_));
      return leaves[next++];
    }
    const auto name = type.get<std::string>();
    if (name == "builtins.NoneType") return graph.insertNode(graph.createNone())->output();
    // A namedtuple (torchvision's GoogLeNetOutputs) is a tuple here, as a
    // scripted module returns it.
    if (name != "builtins.tuple" && name != "builtins.list" && name != "collections.namedtuple") {
      throw UserError(
          fmt::format("{}: its forward returns a {}; hfta fuses forwards that return tensors and "
                      "tuples or lists of them (Hugging Face models: return_dict=False)",
                      label_, name));
    }
    std::vector<Value*> elements;
    for (const auto& child : spec.at("children_spec")) elements.push_back(build(graph, child, leaves, next));
    return graph.insertNode(graph.createTuple(elements))->output();
  }

  std::string label_;
  json spec_;
};

// Fills `block` with a raise: the mode it stands for has no program.
std::vector<Value*> raiseMissingMode(Graph& graph, const std::vector<Value*>& like, const std::string& present,
                                     const std::string& missing) {
  const auto message = fmt::format(
      "hfta: this module's members were exported in {0} mode only (torch.export records one mode), so it cannot "
      "run in {1} mode. Export both modes of each member with hfta.export(model, args, path) and fuse again",
      present, missing);
  graph.insertNode(graph.create(c10::prim::RaiseException,
                                {graph.insertConstant(message), graph.insertNode(graph.createNone())->output()}, 0));
  std::vector<Value*> outputs;
  for (Value* v : like) outputs.push_back(graph.insertNode(graph.createUninitialized(v->type()))->output());
  return outputs;
}

}  // namespace

Module moduleFromPrograms(const std::vector<Program>& programs, const std::string& label) {
  const auto chosen = choosePrograms(programs, label);
  // The programs for train() and eval(), in the order of prim::If's blocks.
  const std::array<const Program*, 2> by_mode{chosen.training, chosen.evaluation};
  const Program& first = chosen.training ? *chosen.training : *chosen.evaluation;

  std::map<std::string, std::string> class_names;
  for (const Program* p : by_mode) {
    if (p) collectClassNames(graphModule(*p).at("graph"), class_names);
  }
  ModuleTree tree(class_names);
  for (const auto& call : graphModule(first).at("module_call_graph")) {
    const auto fqn = call.at("fqn").get<std::string>();
    if (!fqn.empty() && fqn.find('@') == std::string::npos) tree.at(fqn);
  }
  addTensors(tree, first, by_mode[0] && by_mode[1] ? by_mode[1] : nullptr, label);

  ForwardBuilder forward(tree.root(), label);
  forward.addInputs(first);
  const OutputShape shape(first, label);
  auto& graph = *forward.graph();
  if (by_mode[0] == by_mode[1]) {
    graph.registerOutput(shape.build(graph, forward.emitProgram(first)));
  } else {
    if (by_mode[0] && by_mode[1] && !(OutputShape(*by_mode[1], label) == shape)) {
      throw UserError(fmt::format(
          "{}: programs `train` and `eval` return differently structured results ({} in training, {} in "
          "evaluation); a fused forward returns one structure in both modes: make the model's forward return the "
          "same in both",
          label, shape.describe(), OutputShape(*by_mode[1], label).describe()));
    }
    Value* training = graph.insertGetAttr(graph.inputs()[0], "training")->setType(c10::BoolType::get());
    torch::jit::Node* branch = graph.insertNode(graph.create(c10::prim::If, {training}, 0));
    std::array<torch::jit::Block*, 2> blocks{branch->addBlock(), branch->addBlock()};
    std::array<std::vector<Value*>, 2> leaves;
    for (size_t b : {0, 1}) {
      if (!by_mode[b]) continue;
      torch::jit::WithInsertPoint inside(blocks[b]);
      leaves[b] = forward.emitProgram(*by_mode[b]);
    }
    // A mode without a program raises rather than compute the wrong thing.
    for (size_t b : {0, 1}) {
      if (by_mode[b]) continue;
      torch::jit::WithInsertPoint inside(blocks[b]);
      leaves[b] = raiseMissingMode(graph, leaves[1 - b], b == 1 ? "training" : "evaluation",
                                   b == 1 ? "evaluation" : "training");
    }
    if (leaves[0].size() != leaves[1].size()) {
      throw UserError(fmt::format("{}: programs `train` and `eval` return different numbers of results", label));
    }
    std::vector<Value*> results;
    for (size_t i = 0; i < leaves[0].size(); ++i) {
      for (size_t b : {0, 1}) blocks[b]->registerOutput(leaves[b][i]);
      const auto type = c10::unifyTypes(leaves[0][i]->type(), leaves[1][i]->type());
      results.push_back(branch->addOutput()->setType(type.value_or(leaves[0][i]->type())));
    }
    graph.registerOutput(shape.build(graph, results));
  }
  Module module = tree.root();
  addMethod(module, "forward", forward.graph());
  return module;
}

}  // namespace hfta::exported
