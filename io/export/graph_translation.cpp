#include "io/export/graph_translation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/frontend/schema_matching.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "io/export/schema_enums.h"
#include "support/error_summary.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using nlohmann::json;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;
using torch::jit::WithInsertPoint;

// What export records to check its own guards (dtype and device of the
// example, ranges of symbolic sizes): they describe one member as
// exported, not the fused array, and compute nothing.
bool isExportCheck(const std::string& target) {
  static const std::set<std::string> checks = {"torch.ops.aten._assert_tensor_metadata.default",
                                               "torch.ops.aten._assert_scalar.default",
                                               "torch.ops.aten.sym_constrain_range_for_size.default",
                                               "torch.ops.aten.sym_constrain_range.default",
                                               "torch.ops.aten._assert_async.msg",
                                               "torch.ops.aten._assert_async.default"};
  return checks.count(target) > 0;
}

// Operators export records that TorchScript spells otherwise.
const std::map<std::string, std::string>& renamedOperators() {
  static const std::map<std::string, std::string> ops = {
      // Symbolic sizes are read as TorchScript reads sizes: the passes map
      // aten::size of a fused value to the member's own size.
      {"aten::sym_size", "aten::size"},
      {"aten::sym_numel", "aten::numel"},
      {"aten::sym_stride", "aten::stride"},
      {"aten::sym_storage_offset", "aten::storage_offset"},
      // torch.tensor(0) in a forward: a lifted constant, copied fresh and
      // detached in place. In the fused module the constant is one
      // member's slice of a stacked tensor, a view, which detach_ refuses;
      // the out-of-place forms give the same values.
      {"aten::lift_fresh_copy", "aten::clone"},
      {"aten::detach_", "aten::detach"}};
  return ops;
}

// Python's arithmetic on symbolic ints, floats and bools -> the operators
// TorchScript compiles the same Python to.
const std::map<std::string, std::string>& pythonOperators() {
  static const std::map<std::string, std::string> ops = {
      {"_operator.add", "aten::add"},      {"_operator.sub", "aten::sub"},
      {"_operator.mul", "aten::mul"},      {"_operator.floordiv", "aten::floordiv"},
      {"_operator.truediv", "aten::div"},  {"_operator.mod", "aten::remainder"},
      {"_operator.pow", "aten::pow"},      {"_operator.neg", "aten::neg"},
      {"_operator.eq", "aten::eq"},        {"_operator.ne", "aten::ne"},
      {"_operator.lt", "aten::lt"},        {"_operator.le", "aten::le"},
      {"_operator.gt", "aten::gt"},        {"_operator.ge", "aten::ge"},
      {"_operator.and_", "aten::__and__"}, {"_operator.or_", "aten::__or__"},
      {"_operator.not_", "aten::__not__"}, {"torch.sym_not", "aten::__not__"},
      {"torch.sym_max", "prim::max"},      {"torch.sym_min", "prim::min"},
      {"torch.sym_float", "aten::Float"},  {"torch.sym_int", "aten::Int"},
      {"math.ceil", "aten::ceil"},         {"math.floor", "aten::floor"},
      {"math.sqrt", "aten::sqrt"},         {"torch._sym_sqrt", "aten::sqrt"}};
  return ops;
}

// The single member of a serialized union ({"as_tensor": {...}}).
std::pair<std::string, const json*> unionMember(const json& value) {
  if (!value.is_object() || value.size() != 1) return {"", nullptr};
  return {value.begin().key(), &value.begin().value()};
}

class Translator {
 public:
  Translator(Graph& ir, const TranslationSite& site) : ir_(ir), site_(site) {}

  std::vector<Value*> emit(const json& graph, Environment& env) {
    collectMutated(graph);
    for (const auto& node : graph.at("nodes")) emitNode(node, env);
    std::vector<Value*> outputs;
    for (const auto& output : graph.at("outputs")) outputs.push_back(argument(output, env, nullptr));
    return outputs;
  }

 private:
  UserError error(const json* node, const std::string& what) const {
    if (!node) return UserError(fmt::format("{}: {}", site_.label, what));
    return UserError(fmt::format("{}: node {}: {}", site_.label, describeNode(*node), what));
  }

  Value* lookup(const std::string& name, Environment& env, const json* node) const {
    auto it = env.find(name);
    if (it == env.end()) {
      throw error(node, fmt::format("it reads `{}`, which no earlier node of the program defines (a damaged "
                                    "archive?). Save the program again with torch.export.save",
                                    name));
    }
    return it->second;
  }

  // The values of a list of tensor arguments ([{"name": ...}, ...]).
  std::vector<Value*> tensorsNamed(const json& list, Environment& env, const json* node) const {
    std::vector<Value*> tensors;
    for (const auto& t : list) tensors.push_back(lookup(t.at("name").get<std::string>(), env, node));
    return tensors;
  }

  Value* constant(const c10::IValue& value) { return ir_.insertConstant(value); }
  Value* list(const c10::TypePtr& element, const std::vector<Value*>& values) {
    return ir_.insertNode(ir_.createList(element, values))->output();
  }

  // A symbolic int, float or bool argument: a value by name, or a number.
  Value* symbolic(const json& arg, Environment& env, const json* node) {
    const auto [kind, value] = unionMember(arg);
    if (kind == "as_name") return lookup(value->get<std::string>(), env, node);
    if (kind == "as_int") return constant(value->get<int64_t>());
    if (kind == "as_float") return constant(floatOf(*value));
    if (kind == "as_bool") return constant(value->get<bool>());
    throw error(node, fmt::format("a symbolic argument of kind `{}` is not one hfta reads", kind));
  }

  Value* symbolicList(const json& items, const c10::TypePtr& element, Environment& env, const json* node) {
    std::vector<Value*> values;
    for (const auto& item : items) values.push_back(symbolic(item, env, node));
    return list(element, values);
  }

  Value* device(const json& exported) {
    const auto device = deviceOf(exported);
    if (!site_.device_of || device != site_.exported_device) return constant(device);
    if (!input_device_) {
      Node* node = ir_.create(c10::prim::device, {site_.device_of});
      node->output()->setType(c10::DeviceObjType::get());
      ir_.block()->prependNode(node);
      input_device_ = node->output();
    }
    return input_device_;
  }

  // `expected`: the type the operator's schema gives the argument, where
  // known (a list of tensors export writes for a Tensor?[] argument must
  // be typed so, or the match falls to another overload).
  Value* argument(const json& arg, Environment& env, const json* node, const c10::TypePtr& expected = nullptr) {
    const auto [kind, value] = unionMember(arg);
    if (!value) throw error(node, "an argument does not read (a damaged archive?)");
    const json& v = *value;
    if (kind == "as_none") return ir_.insertNode(ir_.createNone())->output();
    if (kind == "as_tensor") return lookup(v.at("name").get<std::string>(), env, node);
    if (kind == "as_tensors") {
      const auto tensors = tensorsNamed(v, env, node);
      const bool optional = expected && *expected == *c10::ListType::create(c10::OptionalType::ofTensor());
      return list(optional ? c10::OptionalType::ofTensor() : c10::TypePtr(c10::TensorType::get()), tensors);
    }
    if (kind == "as_optional_tensor") return argument(v, env, node);
    if (kind == "as_optional_tensors") {
      std::vector<Value*> tensors;
      for (const auto& t : v) tensors.push_back(argument(t, env, node));
      return list(c10::OptionalType::ofTensor(), tensors);
    }
    if (kind == "as_int") return constant(v.get<int64_t>());
    if (kind == "as_ints") return constant(v.get<std::vector<int64_t>>());
    if (kind == "as_float") return constant(floatOf(v));
    if (kind == "as_floats") {
      std::vector<double> floats;
      for (const auto& f : v) floats.push_back(floatOf(f));
      return constant(floats);
    }
    if (kind == "as_bool") return constant(v.get<bool>());
    if (kind == "as_bools") {
      c10::List<bool> flags;
      for (const auto& flag : v) flags.push_back(flag.get<bool>());
      return constant(flags);
    }
    if (kind == "as_string") return constant(v.get<std::string>());
    if (kind == "as_strings") return constant(c10::List<std::string>(v.get<std::vector<std::string>>()));
    if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") return symbolic(v, env, node);
    if (kind == "as_sym_ints") return symbolicList(v, c10::IntType::get(), env, node);
    if (kind == "as_sym_floats") return symbolicList(v, c10::FloatType::get(), env, node);
    if (kind == "as_sym_bools") return symbolicList(v, c10::BoolType::get(), env, node);
    if (kind == "as_scalar_type") return constant(scalarTypeOf(v.get<int64_t>()));
    if (kind == "as_layout") return constant(layoutOf(v.get<int64_t>()));
    if (kind == "as_memory_format") return constant(memoryFormatOf(v.get<int64_t>()));
    if (kind == "as_device") return device(v);
    if (kind == "as_complex") return constant(c10::complex<double>(floatOf(v.at("real")), floatOf(v.at("imag"))));
    if (kind == "as_int_lists") {
      std::vector<Value*> lists;
      for (const auto& l : v) lists.push_back(constant(l.get<std::vector<int64_t>>()));
      return list(c10::ListType::ofInts(), lists);
    }
    throw error(node,
                fmt::format("it takes an argument of kind `{}`, which hfta does not translate{}", kind,
                            kind == "as_custom_obj" ? " (a TorchScript object: fuse the scripted model instead)" : ""));
  }

  // The exported names of a node's outputs -> the IR values computing them.
  void bindOutputs(const json& node, const std::vector<Value*>& results, Environment& env) {
    const auto& outputs = node.at("outputs");
    // A single list output whose elements are separate results (a
    // higher-order operator's) or one IR list to unpack.
    if (outputs.size() == 1 && results.size() != 1) {
      const auto [kind, value] = unionMember(outputs[0]);
      if (kind == "as_tensors" && value->size() == results.size()) {
        for (size_t i = 0; i < results.size(); ++i) env[(*value)[i].at("name").get<std::string>()] = results[i];
        return;
      }
    }
    if (outputs.size() != results.size()) {
      throw error(&node, fmt::format("it has {} outputs in the program and {} in TorchScript's schema", outputs.size(),
                                     results.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const auto [kind, value] = unionMember(outputs[i]);
      if (kind == "as_tensor") {
        env[value->at("name").get<std::string>()] = results[i];
      } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
        if (value->contains("as_name")) env[value->at("as_name").get<std::string>()] = results[i];
      } else if (kind == "as_tensors" || kind == "as_optional_tensors") {
        Node* unpack = ir_.insertNode(ir_.createListUnpack(results[i], value->size()));
        for (size_t j = 0; j < value->size(); ++j) {
          const auto [element_kind, element] = unionMember((*value)[j]);
          const json& tensor = kind == "as_tensors" ? (*value)[j] : *element;
          if (kind == "as_tensors" || element_kind == "as_tensor") {
            env[tensor.at("name").get<std::string>()] = unpack->output(j);
          }
        }
      }
      // as_none and constants name no value.
    }
  }

  // Positional (kind 1, or unrecorded) and keyword (kind 2) arguments,
  // typed as `schema` (the overload export named, if registered) has them.
  std::pair<std::vector<NamedValue>, std::vector<NamedValue>> callArguments(const json& node, Environment& env,
                                                                            const c10::FunctionSchema* schema) {
    std::vector<NamedValue> args, kwargs;
    const auto loc = sourceRangeOf(node);
    for (const auto& input : node.at("inputs")) {
      const bool keyword = input.value("kind", json()).is_number() && input.at("kind").get<int>() == 2;
      const auto name = input.at("name").get<std::string>();
      c10::TypePtr expected;
      if (schema) {
        const auto index = keyword ? schema->argumentIndexWithName(name) : std::optional<int>(args.size());
        if (index && *index < static_cast<int>(schema->arguments().size())) {
          expected = schema->arguments()[*index].type();
        }
      }
      Value* value = argument(input.at("arg"), env, &node, expected);
      if (keyword) {
        kwargs.emplace_back(loc, name, value);
      } else {
        args.emplace_back(loc, value);
      }
    }
    return {args, kwargs};
  }

  // The operator `symbol`, its overload `overload` tried first and without
  // implicit conversions (then the others, as TorchScript would choose).
  std::vector<Value*> emitCall(const json& node, const std::string& symbol, const std::string& overload,
                               Environment& env) {
    const auto sym = c10::Symbol::fromQualString(symbol);
    const auto& operators = torch::jit::getAllOperatorsFor(sym);
    if (operators.empty()) {
      throw error(&node, fmt::format("no operator `{}` is registered in this process. A custom operator must be "
                                     "loaded (its library) before fusing",
                                     symbol));
    }
    std::vector<const c10::FunctionSchema*> schemas;
    const c10::FunctionSchema* named = nullptr;
    for (const auto& op : operators) {
      if (op->schema().overload_name() == overload) {
        named = &op->schema();
        schemas.insert(schemas.begin(), named);
      } else {
        schemas.push_back(&op->schema());
      }
    }
    const auto [args, kwargs] = callArguments(node, env, named);
    const auto loc = sourceRangeOf(node);
    torch::jit::MatchedSchema matched;
    try {
      matched = torch::jit::matchSchemas(schemas, loc, ir_, args, kwargs).second;
    } catch (const std::exception& e) {
      throw error(&node, fmt::format("its arguments match no schema of `{}`: {}", symbol, errorSummary(e)));
    }
    Node* call = ir_.insertNode(ir_.create(sym, matched.inputs, 0));
    call->setSourceRange(loc);
    std::vector<Value*> results;
    for (const auto& type : matched.return_types) results.push_back(call->addOutput()->setType(type));
    return results;
  }

  // Python's arithmetic on numbers: the overload named for its arguments'
  // types ("int", "float_int"), as TorchScript compiles `a * b` on ints to
  // aten::mul.int (a Scalar overload would return a number, not an int).
  std::string numberOverload(const json& node, Environment& env) {
    std::vector<std::string> names;
    for (const auto& input : node.at("inputs")) {
      const auto [kind, value] = unionMember(input.at("arg"));
      const bool by_name = value && value->is_object() && value->contains("as_name");
      const auto type = by_name ? lookup(value->at("as_name").get<std::string>(), env, &node)->type()->kind()
                                : c10::TypeKind::AnyType;
      if (kind == "as_int" || (kind == "as_sym_int" && !by_name) || type == c10::TypeKind::IntType)
        names.push_back("int");
      else if (kind == "as_float" || type == c10::TypeKind::FloatType)
        names.push_back("float");
      else if (kind == "as_bool" || type == c10::TypeKind::BoolType)
        names.push_back("bool");
      else
        return "";
    }
    if (std::all_of(names.begin(), names.end(), [&](const auto& n) { return n == names[0]; })) return names[0];
    return fmt::format("{}", fmt::join(names, "_"));
  }

  std::vector<Value*> emitOperator(const json& node, const std::string& target, Environment& env) {
    // torch.ops.<namespace>.<name>.<overload>
    const std::string qualified = target.substr(std::string("torch.ops.").size());
    const auto dot = qualified.find('.');
    const auto last = qualified.rfind('.');
    if (dot == std::string::npos || dot == last) throw error(&node, "its target is not an operator overload");
    std::string symbol = qualified.substr(0, dot) + "::" + qualified.substr(dot + 1, last - dot - 1);
    std::string overload = qualified.substr(last + 1);
    if (overload == "default") overload = "";
    if (const auto it = renamedOperators().find(symbol); it != renamedOperators().end()) symbol = it->second;
    // Export leaves out x.contiguous() where the traced x was contiguous,
    // so a view may rely on the strides one member's kernels gave (the CPU
    // attention's output, laid out for nn.MultiheadAttention's permute and
    // view). The fused layouts differ: a reshape is the same values and
    // copies where a view could not. Not where the result is written in
    // place (the write must reach the viewed tensor).
    if (symbol == "aten::view" && overload.empty() && !mutated_.count(outputName(node))) {
      symbol = "aten::reshape";
    }
    return emitCall(node, symbol, overload, env);
  }

  // A subgraph of a higher-order operator emitted with its inputs bound to
  // `operands`.
  std::vector<Value*> emitSubgraph(const json& node, const json& graph_argument, const std::vector<Value*>& operands) {
    const auto& graph = graph_argument.at("graph");
    const auto& inputs = graph.at("inputs");
    if (inputs.size() != operands.size()) {
      throw error(&node, fmt::format("its subgraph `{}` takes {} inputs and is given {}",
                                     graph_argument.value("name", ""), inputs.size(), operands.size()));
    }
    Environment inner;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto [kind, value] = unionMember(inputs[i]);
      const auto name = kind == "as_tensor" ? value->at("name") : value->value("as_name", json());
      if (name.is_string()) inner[name.get<std::string>()] = operands[i];
    }
    return emit(graph, inner);
  }

  // The arguments of a higher-order operator: its subgraphs and the
  // values of the others, lists flattened (the operands).
  struct HigherOrderArguments {
    std::vector<const json*> graphs;
    std::vector<Value*> values;
  };
  HigherOrderArguments higherOrderArguments(const json& node, Environment& env) {
    HigherOrderArguments out;
    for (const auto& input : node.at("inputs")) {
      const auto [kind, value] = unionMember(input.at("arg"));
      if (kind == "as_graph") {
        out.graphs.push_back(value);
      } else if (kind == "as_tensors") {
        const auto tensors = tensorsNamed(*value, env, &node);
        out.values.insert(out.values.end(), tensors.begin(), tensors.end());
      } else {
        out.values.push_back(argument(input.at("arg"), env, &node));
      }
    }
    return out;
  }

  Value* asBool(Value* condition) {
    if (condition->type()->isSubtypeOf(*c10::BoolType::get())) return condition;
    return ir_.insert(c10::aten::Bool, {condition});
  }

  // A node with blocks, each block's outputs from `emit_block`; the node's
  // outputs take the first block's types.
  Node* blockNode(c10::Symbol kind, const std::vector<Value*>& inputs, size_t blocks, const json& node,
                  const std::function<std::vector<Value*>(size_t, torch::jit::Block*)>& emit_block) {
    Node* n = ir_.insertNode(ir_.create(kind, inputs, 0));
    n->setSourceRange(sourceRangeOf(node));
    for (size_t b = 0; b < blocks; ++b) {
      auto* block = n->addBlock();
      WithInsertPoint inside(block);
      for (Value* v : emit_block(b, block)) block->registerOutput(v);
    }
    return n;
  }

  std::vector<Value*> emitCond(const json& node, Environment& env) {
    const auto args = higherOrderArguments(node, env);
    if (args.graphs.size() != 2 || args.values.empty())
      throw error(&node, "torch.cond takes a predicate and two branches");
    const std::vector<Value*> operands(args.values.begin() + 1, args.values.end());
    Node* n = blockNode(c10::prim::If, {asBool(args.values[0])}, 2, node,
                        [&](size_t b, torch::jit::Block*) { return emitSubgraph(node, *args.graphs[b], operands); });
    std::vector<Value*> results;
    for (Value* v : n->blocks()[0]->outputs()) results.push_back(n->addOutput()->setType(v->type()));
    return results;
  }

  // while_loop(cond_fn, body_fn, carried_inputs, additional_inputs) ->
  // prim::Loop(max, cond(carried)) { carried = body(carried); cond(carried) }
  std::vector<Value*> emitWhileLoop(const json& node, Environment& env) {
    const auto& inputs = node.at("inputs");
    if (inputs.size() != 4) throw error(&node, "while_loop takes cond_fn, body_fn, carried and additional inputs");
    const auto flat = [&](const json& input) {
      const auto [kind, value] = unionMember(input.at("arg"));
      if (kind == "as_tensors") return tensorsNamed(*value, env, &node);
      if (kind == "as_none") return std::vector<Value*>{};
      return std::vector<Value*>{argument(input.at("arg"), env, &node)};
    };
    const json& cond_fn = inputs[0].at("arg").at("as_graph");
    const json& body_fn = inputs[1].at("arg").at("as_graph");
    const auto carried = flat(inputs[2]);
    const auto additional = flat(inputs[3]);
    auto with_additional = [&](std::vector<Value*> values) {
      values.insert(values.end(), additional.begin(), additional.end());
      return values;
    };
    Value* first = asBool(emitSubgraph(node, cond_fn, with_additional(carried)).at(0));
    std::vector<Value*> loop_inputs{constant(std::numeric_limits<int64_t>::max()), first};
    loop_inputs.insert(loop_inputs.end(), carried.begin(), carried.end());
    Node* loop = blockNode(c10::prim::Loop, loop_inputs, 1, node, [&](size_t, torch::jit::Block* block) {
      block->addInput()->setType(c10::IntType::get());
      std::vector<Value*> current;
      for (Value* v : carried) current.push_back(block->addInput()->setType(v->type()));
      const auto next = emitSubgraph(node, body_fn, with_additional(current));
      std::vector<Value*> outputs{asBool(emitSubgraph(node, cond_fn, with_additional(next)).at(0))};
      outputs.insert(outputs.end(), next.begin(), next.end());
      return outputs;
    });
    std::vector<Value*> results;
    for (Value* v : carried) results.push_back(loop->addOutput()->setType(v->type()));
    return results;
  }

  void setGradEnabled(Value* enabled) {
    // Graph::insert packs an operator's results in a tuple: none here.
    Value* none = ir_.insert(c10::Symbol::fromQualString("aten::set_grad_enabled"), {enabled});
    if (none->node()->kind() == c10::prim::TupleConstruct && !none->hasUses()) none->node()->destroy();
  }

  // wrap_with_set_grad_enabled(enabled, subgraph, *operands): the subgraph
  // between set_grad_enabled(enabled) and the mode before it.
  std::vector<Value*> emitSetGradEnabled(const json& node, Environment& env) {
    const auto args = higherOrderArguments(node, env);
    if (args.graphs.size() != 1 || args.values.empty()) throw error(&node, "it takes a flag and one subgraph");
    Value* before = ir_.insert(c10::Symbol::fromQualString("aten::is_grad_enabled"), {});
    setGradEnabled(args.values[0]);
    const auto results =
        emitSubgraph(node, *args.graphs[0], std::vector<Value*>(args.values.begin() + 1, args.values.end()));
    setGradEnabled(before);
    return results;
  }

  std::vector<Value*> emitHigherOrder(const json& node, const std::string& target, Environment& env) {
    const std::string name = target.substr(std::string("torch.ops.higher_order.").size());
    if (name == "cond") return emitCond(node, env);
    if (name == "while_loop") return emitWhileLoop(node, env);
    if (name == "wrap_with_set_grad_enabled") return emitSetGradEnabled(node, env);
    if (name == "auto_functionalized" || name == "auto_functionalized_v2") {
      throw error(&node, fmt::format("the higher-order operator `{}` comes from a functionalized program "
                                     "(ExportedProgram.run_decompositions()); fuse the program torch.export.export "
                                     "returns, before decompositions",
                                     name));
    }
    throw error(&node, fmt::format("hfta does not translate the higher-order operator `{}` (it translates cond, "
                                   "while_loop and wrap_with_set_grad_enabled); rewrite the model without it",
                                   name));
  }

  void emitNode(const json& node, Environment& env) {
    const auto target = node.at("target").get<std::string>();
    if (isExportCheck(target)) return;
    std::vector<Value*> results;
    if (target.rfind("torch.ops.higher_order.", 0) == 0) {
      results = emitHigherOrder(node, target, env);
    } else if (target.rfind("torch.ops.", 0) == 0) {
      results = emitOperator(node, target, env);
    } else if (const auto it = pythonOperators().find(target); it != pythonOperators().end()) {
      results = emitCall(node, it->second, numberOverload(node, env), env);
    } else {
      throw error(&node,
                  "hfta does not translate this function (not an operator of torch.ops, nor Python "
                  "arithmetic on sizes); rewrite the model without it");
    }
    bindOutputs(node, results, env);
  }

  static std::string outputName(const json& node) {
    const auto& outputs = node.at("outputs");
    if (outputs.size() != 1 || !outputs[0].contains("as_tensor")) return "";
    return outputs[0].at("as_tensor").at("name").get<std::string>();
  }

  // Values an in-place operator (add_, copy_: a name ending in "_") writes.
  void collectMutated(const json& graph) {
    for (const auto& node : graph.at("nodes")) {
      const auto target = node.at("target").get<std::string>();
      const auto last = target.rfind('.');
      const auto op_end = last == std::string::npos ? target.size() : last;
      const auto op_start = target.rfind('.', op_end - 1);
      const bool in_place = op_end > 0 && target[op_end - 1] == '_' && op_start != std::string::npos &&
                            target.compare(op_start + 1, 2, "__") != 0;
      if (in_place && !node.at("inputs").empty() && node.at("inputs")[0].at("arg").contains("as_tensor")) {
        mutated_.insert(node.at("inputs")[0].at("arg").at("as_tensor").at("name").get<std::string>());
      }
    }
  }

  Graph& ir_;
  const TranslationSite& site_;
  std::set<std::string> mutated_;
  Value* input_device_ = nullptr;
};

}  // namespace

torch::jit::SourceRange sourceRangeOf(const json& node) {
  const auto metadata = node.find("metadata");
  if (metadata == node.end() || !metadata->contains("stack_trace")) return {};
  // 'File "m.py", line 7, in forward\n    x = self.fc(x)\n  File ...':
  // the first frame outside torch's own package (the model's line), else
  // the first (for a node inside a torch.nn module, its forward's line).
  const auto trace = metadata->at("stack_trace").get<std::string>();
  auto file_start = trace.find("File \"");
  if (file_start == std::string::npos) return {};
  for (auto frame = file_start; frame != std::string::npos; frame = trace.find("File \"", frame + 6)) {
    const auto path_end = trace.find('"', frame + 6);
    const auto path = trace.substr(frame + 6, path_end == std::string::npos ? 0 : path_end - frame - 6);
    if (path.find("/torch/") == std::string::npos && path.rfind("torch/", 0) != 0) {
      file_start = frame;
      break;
    }
  }
  const auto file_end = trace.find('"', file_start + 6);
  const auto line_at = trace.find(", line ", file_end);
  if (file_end == std::string::npos || line_at == std::string::npos) return {};
  const auto line = std::strtoul(trace.c_str() + line_at + 7, nullptr, 10);
  const auto code_start = trace.find('\n', line_at);
  std::string code;
  if (code_start != std::string::npos) {
    const auto code_end = trace.find('\n', code_start + 1);
    code = trace.substr(code_start + 1, code_end == std::string::npos ? std::string::npos : code_end - code_start - 1);
    code.erase(0, code.find_first_not_of(' '));
  }
  auto source =
      std::make_shared<torch::jit::Source>(code, trace.substr(file_start + 6, file_end - file_start - 6), line);
  return torch::jit::SourceRange(source, 0, code.size());
}

std::string describeNode(const json& node) {
  const auto target = node.at("target").get<std::string>();
  const auto range = sourceRangeOf(node);
  const auto flc = range.file_line_col();
  if (!flc) return fmt::format("`{}` (no source line recorded)", target);
  return fmt::format("`{}` at {}:{}: `{}`", target, std::get<0>(*flc), std::get<1>(*flc), range.text().str());
}

std::vector<Value*> emitGraph(Graph& ir, const json& graph, Environment& env, const TranslationSite& site) {
  return Translator(ir, site).emit(graph, env);
}

}  // namespace hfta::exported
