#include "passes/fuse/rule_context.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/ops/op_kinds.h"
#include "support/torch_types.h"

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
  return insert(kind::stacked_dim(), {dim});
}

Value* RuleContext::stackedDims(size_t i) {
  Value* dims = uniform(i);
  if (dims->mustBeNone()) return dims;
  if (auto constant = constantInts(dims)) {
    for (auto& d : *constant) d = d >= 0 ? d + 1 : d;
    return graph().insertConstant(*constant);
  }
  return insert(kind::stacked_dims(), {dims});
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
    // One dim or a list of them (constant_as<int64_t> asserts on a list).
    const bool single = dim->type()->kind() == c10::TypeKind::IntType;
    if (auto one = single ? torch::jit::constant_as<int64_t>(dim) : std::nullopt) {
      if (*one < 2) return false;
    } else if (auto many = single ? std::nullopt : constantInts(dim)) {
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

RuleResult fuseAsMemberOp(RuleContext& ctx, c10::Symbol op, const std::vector<size_t>& broadcastable) {
  Node* node = ctx.node();
  std::vector<Value*> inputs;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const bool holds_tensor = containsTensor(node->input(i)->type());
    if (ctx.kind(i) == ValueKind::PerMember || (!holds_tensor && ctx.kind(i) != ValueKind::Uniform)) {
      return RuleResult::decline(fmt::format("argument {} differs per member and is not a tensor", i));
    }
  }
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const bool none = ctx.kind(i) == ValueKind::Uniform && ctx.input(i).value->mustBeNone();
    if (!containsTensor(node->input(i)->type()) || none) {
      inputs.push_back(ctx.input(i).value);
    } else if (std::find(broadcastable.begin(), broadcastable.end(), i) != broadcastable.end()) {
      inputs.push_back(ctx.arrayOrBroadcast(i));
    } else {
      inputs.push_back(ctx.array(i));
    }
  }
  auto& g = ctx.graph();
  Node* fused = g.create(op, inputs, node->outputs().size());
  fused->setSourceRange(node->sourceRange());
  for (size_t i = 0; i < node->outputs().size(); ++i) fused->output(i)->setType(node->output(i)->type());
  g.insertNode(fused);
  TORCH_INTERNAL_ASSERT(fused->maybeSchema(), "hfta: no schema of ", op.toQualString(), " matches ",
                        node->kind().toQualString(), "'s arguments");
  ctx.bindOutputsByType(fused);
  return RuleResult::fused();
}

}  // namespace hfta
