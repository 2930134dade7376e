#include "passes/fuse/rule_context.h"

namespace hfta {

using torch::jit::Node;
using torch::jit::Value;

std::optional<std::vector<int64_t>> constantInts(Value* v) {
  if (auto list = torch::jit::constant_as<std::vector<int64_t>>(v)) return list;
  if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<int64_t> ints;
  for (Value* element : v->node()->inputs()) {
    auto constant = torch::jit::constant_as<int64_t>(element);
    if (!constant) return std::nullopt;
    ints.push_back(*constant);
  }
  return ints;
}

bool RuleContext::uniformFrom(size_t first) const {
  for (size_t i = first; i < node_->inputs().size(); ++i) {
    if (input(i).kind != ValueKind::Uniform) return false;
  }
  return true;
}

Value* RuleContext::uniform(size_t i) const {
  TORCH_INTERNAL_ASSERT(kind(i) == ValueKind::Uniform, "hfta: input ", i, " of ", node_->kind().toQualString(),
                        " is not uniform");
  return input(i).value;
}

Value* RuleContext::arrayOrNone(size_t i) {
  const bool none = kind(i) == ValueKind::Uniform && input(i).value->mustBeNone();
  return none ? input(i).value : array(i);
}

Value* RuleContext::stackedDim(size_t i) {
  Value* dim = uniform(i);
  if (auto constant = torch::jit::constant_as<int64_t>(dim)) {
    return graph().insertConstant(*constant >= 0 ? *constant + 1 : *constant);
  }
  return insert(c10::Symbol::fromQualString("hfta::stacked_dim"), {dim});
}

Value* RuleContext::stackedDims(size_t i) {
  Value* dims = uniform(i);
  if (dims->mustBeNone()) return dims;
  if (auto constant = constantInts(dims)) {
    for (auto& d : *constant) d = d >= 0 ? d + 1 : d;
    return graph().insertConstant(*constant);
  }
  return insert(c10::Symbol::fromQualString("hfta::stacked_dims"), {dims});
}

Value* RuleContext::stackedShape(size_t i) {
  Value* members = graph().insertConstant(std::vector<int64_t>{arraySize()});
  return insert(c10::aten::add, {members, uniform(i)});
}

Value* RuleContext::insert(c10::Symbol op, std::vector<torch::jit::NamedValue> args,
                           std::vector<torch::jit::NamedValue> kwargs) {
  return graph().insert(op, args, kwargs, node_->sourceRange());
}

Node* RuleContext::insertCopy(const std::unordered_map<size_t, Value*>& replaced) {
  Node* copy = graph().createClone(node_, [&](Value* v) { return fuser_.lookup(v).value; });
  // By position: one template value may fill two inputs that fuse apart
  // (slice(x, 1, None, None, 1): the dim moves, the step stays).
  for (const auto& [index, value] : replaced) copy->replaceInput(index, value);
  return graph().insertNode(copy);
}

void RuleContext::bindOutput(size_t i, Value* value, ValueKind kind) { fuser_.bind(node_->output(i), {value, kind}); }

void RuleContext::bindOutputsByType(Node* copy, ValueKind tensor_kind) {
  for (size_t i = 0; i < copy->outputs().size(); ++i) {
    bindOutput(i, copy->output(i), containsTensor(copy->output(i)->type()) ? tensor_kind : ValueKind::Uniform);
  }
}

bool RuleContext::foldedWithSpatialDims(size_t i, const std::vector<size_t>& dims) const {
  if (kind(i) != ValueKind::Folded) return false;
  for (size_t d : dims) {
    if (kind(d) != ValueKind::Uniform) return false;
    Value* dim = input(d).value;
    if (auto one = torch::jit::constant_as<int64_t>(dim)) {
      if (*one < 2) return false;
    } else if (auto many = constantInts(dim)) {
      if (many->empty()) return false;
      for (int64_t x : *many) {
        if (x < 2) return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace hfta
