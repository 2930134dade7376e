#include "io/export/forward_builder.h"

#include <fmt/format.h>

#include <cctype>
#include <functional>
#include <map>
#include <sstream>

#include "io/export/graph_translation.h"
#include "io/export/module_tree.h"
#include "io/export/schema_enums.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using nlohmann::json;
using torch::jit::Graph;
using torch::jit::Module;
using torch::jit::Value;

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
  // The value `make` inserts for `name`, made once, at the top of the
  // graph, where both modes' branches see it.
  Value* atTop(const std::string& name, const std::function<Value*()>& make) {
    auto it = top_level_.find(name);
    if (it != top_level_.end()) return it->second;
    torch::jit::WithInsertPoint top(graph_->block()->nodes().front());
    return top_level_[name] = make();
  }

  // The module's tensor at a qualified name ("layer1.0.bn.weight").
  Value* attribute(const std::string& qualified) {
    return atTop(qualified, [&] {
      Value* owner = self_;
      Module module = root_;
      std::stringstream path(qualified);
      std::string part;
      std::vector<std::string> parts;
      while (std::getline(path, part, '.')) parts.push_back(part);
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!module.hasattr(parts[i])) {
          throw UserError(
              fmt::format("{}: the program reads `{}`, which the archive holds no tensor for", label_, qualified));
        }
        if (i + 1 == parts.size()) return graph_->insertGetAttr(owner, parts[i])->setType(c10::TensorType::get());
        module = module.attr(parts[i]).toModule();
        owner = graph_->insertGetAttr(owner, parts[i])->setType(module.type());
      }
      return owner;
    });
  }

  // A tensor the forward's code made (torch.tensor(count): export lifts it
  // as `lifted_tensor_N`) is a constant of the graph, the same in every
  // member, as TorchScript keeps it; a module's own tensor attribute is
  // read from the module (its value may differ per member).
  Value* tensorConstant(const Program& program, const std::string& name) {
    if (!isLiftedConstant(name)) return attribute(name);
    return atTop(name, [&] { return graph_->insertConstant(program.constants.at(name)); });
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
  std::map<std::string, Value*> top_level_;  // attributes and lifted constants, by name
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

std::shared_ptr<Graph> buildForward(const Module& root, const std::array<const Program*, 2>& by_mode,
                                    const std::string& label) {
  const Program& first = by_mode[0] ? *by_mode[0] : *by_mode[1];
  ForwardBuilder forward(root, label);
  forward.addInputs(first);
  const OutputShape shape(first, label);
  auto& graph = *forward.graph();
  if (by_mode[0] == by_mode[1]) {
    graph.registerOutput(shape.build(graph, forward.emitProgram(first)));
  } else {
    if (by_mode[0] && by_mode[1]) {
      const OutputShape evaluation(*by_mode[1], label);
      if (!(evaluation == shape)) {
        throw UserError(fmt::format(
            "{}: programs `train` and `eval` return differently structured results ({} in training, {} in "
            "evaluation); a fused forward returns one structure in both modes: make the model's forward return "
            "the same in both",
            label, shape.describe(), evaluation.describe()));
      }
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
  return forward.graph();
}

}  // namespace hfta::exported
