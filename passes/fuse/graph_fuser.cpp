#include "passes/fuse/graph_fuser.h"

#include <fmt/format.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>

#include "passes/fuse/fallback.h"
#include "passes/fuse/linear_log_softmax.h"
#include "passes/fuse/rules/rules.h"
#include "passes/fuse/segment_plans.h"
#include "passes/ir/diagnostics.h"
#include "passes/ir/stack_members.h"
#include "passes/ir/writes.h"
#include "runtime/ops/op_kinds.h"
#include "support/torch_types.h"

namespace hfta {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using torch::jit::WithInsertPoint;

namespace {

// The conversions on the fused plan's path (a segment's members' plan
// reads folded values through views, which do not count).
int64_t countLayoutConversions(Block* block) {
  int64_t count = 0;
  for (Node* node : block->nodes()) {
    count += node->kind() == kind::fold_channels() || node->kind() == kind::unfold_channels();
    const bool plans = node->kind() == c10::prim::If && node->input()->node()->kind() == kind::segment_plan();
    for (Block* inner : node->blocks()) {
      if (!plans || inner == node->blocks()[0]) count += countLayoutConversions(inner);
    }
  }
  return count;
}

bool isEmptyTensorList(const Node* node) {
  if (node->kind() != c10::prim::ListConstruct || !node->inputs().empty()) return false;
  return node->output()->type()->cast<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
}

}  // namespace

bool isStackedAttribute(const c10::TypePtr& type) {
  if (isTensorLike(type)) return true;
  const auto list = type->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

GraphFuser::GraphFuser(Graph& fused, int64_t array_size, FusionReport& report)
    : graph_(fused), array_size_(array_size), report_(report) {}

void GraphFuser::bind(const Value* tmpl, FusedValue fused) {
  // Keep the member's value names: the fused IR then reads like the original.
  if (!fused.value->hasDebugName() && tmpl->hasDebugName()) {
    fused.value->setDebugName(tmpl->debugNameBase());
  }
  env_[tmpl] = fused;
}

const FusedValue& GraphFuser::lookup(const Value* tmpl) const {
  auto it = env_.find(tmpl);
  TORCH_INTERNAL_ASSERT(it != env_.end(), "hfta: value %", tmpl->debugName(), " was not fused");
  return it->second;
}

std::vector<FusedValue> GraphFuser::fuseBlock(Block* tmpl, Block* target) {
  WithInsertPoint guard(target);
  for (Node* node : tmpl->nodes()) fuseNode(node);
  std::vector<FusedValue> outputs;
  for (Value* v : tmpl->outputs()) outputs.push_back(lookup(v));
  return outputs;
}

// A node is uniform when it computes the same thing in every member: no
// per-member input (its blocks included), no randomness, and no read of a
// stacked parameter.
bool GraphFuser::isUniform(const Node* node) const {
  if (node->isNondeterministic()) return false;
  if (node->kind() == c10::prim::GetAttr && isStackedAttribute(node->output()->type())) return false;
  for (const Value* input : node->inputs()) {
    auto it = env_.find(input);
    // Values defined inside the node's own blocks are not bound yet.
    if (it != env_.end() && it->second.kind != ValueKind::Uniform) return false;
  }
  for (const Block* block : node->blocks()) {
    for (const Node* inner : block->nodes()) {
      if (!isUniform(inner)) return false;
    }
    for (const Value* out : block->outputs()) {
      auto it = env_.find(out);
      if (it != env_.end() && it->second.kind != ValueKind::Uniform) return false;
    }
  }
  return true;
}

Node* GraphFuser::insertAsIs(Node* node) {
  return graph_.insertNode(graph_.createClone(node, [&](Value* v) { return lookup(v).value; }));
}

void GraphFuser::copyUniform(Node* node) {
  Node* copy = insertAsIs(node);
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    // An empty tensor list is vacuously an array; binding it as one lets
    // members append their own tensors to it.
    bind(node->output(i), {copy->output(i), isEmptyTensorList(node) ? ValueKind::Array : ValueKind::Uniform});
  }
}

void GraphFuser::fuseNode(Node* node) {
  if (node->kind() == c10::prim::GetAttr) {
    // Tensor attributes of a fused module are stacked (lists of tensors
    // element by element); the rest are equal in every member (checked by
    // lockstep matching).
    Node* copy = insertAsIs(node);
    bind(node->output(),
         {copy->output(), isStackedAttribute(node->output()->type()) ? ValueKind::Array : ValueKind::Uniform});
    return;
  }
  if (node->kind() == c10::prim::Uninitialized) {
    // What TorchScript defines on paths that raise or return early: never
    // read, so it can stand for any kind; as an array it lets the rules of
    // the dead code after a raise fuse instead of falling back.
    Node* copy = insertAsIs(node);
    bind(node->output(),
         {copy->output(), containsTensor(node->output()->type()) ? ValueKind::Array : ValueKind::Uniform});
    return;
  }
  if (isUniform(node)) {
    copyUniform(node);
    ++report_.uniform_nodes;
    return;
  }
  std::string why;
  const bool reads_ragged =
      std::any_of(node->inputs().begin(), node->inputs().end(), [&](const Value* v) { return isRagged(v); });
  if (reads_ragged) {
    // No rule may stack what may not stack.
    why = "reads per-member tensors whose sizes may differ (a packed sequence's data)";
  } else if (const RuleEntry* rule = findRule(node)) {
    const auto fused_mark = report_.fused.size();
    const auto fallback_mark = report_.fallbacks.size();
    RuleContext context(*this, node);
    RuleResult result = rule->fuse(context);
    if (!result.declined) {
      for (const Value* out : node->outputs()) {
        TORCH_INTERNAL_ASSERT(env_.count(out), "hfta rule ", rule->key, " left an output unbound");
      }
      report_.fused.push_back({node->kind().toQualString(), sourceLine(node), rule->family});
      forgetCopiesWrittenBy(node);
      return;
    }
    // Whatever the rule reported for nested nodes is void now.
    report_.fused.resize(fused_mark);
    report_.fallbacks.resize(fallback_mark);
    why = *result.declined;
  } else {
    const auto* schema = node->maybeSchema();
    why = fmt::format("no fusion rule for {}", schema ? toString(*schema) : node->kind().toQualString());
  }
  runPerMember(*this, node);
  report_.fallbacks.push_back({node->kind().toQualString(), sourceLine(node), why});
  forgetCopiesWrittenBy(node);
}

void GraphFuser::forgetCopiesWrittenBy(const Node* node) {
  // Which values a write reaches through views is not tracked here: any
  // in-place write makes every earlier Array -> Folded copy suspect.
  if (writesInPlace(node)) folded_copies_.clear();
}

void GraphFuser::discard(Node* node) {
  auto inside = [node](const Value* v) {
    for (const Block* b = v->node()->owningBlock(); b != nullptr && b->owningNode() != nullptr;
         b = b->owningNode()->owningBlock()) {
      if (b->owningNode() == node) return true;
    }
    return false;
  };
  for (auto* cache : {&array_views_, &folded_copies_}) {
    for (auto it = cache->begin(); it != cache->end();) {
      it = inside(it->first) || inside(it->second) ? cache->erase(it) : std::next(it);
    }
  }
  node->destroy();
}

Value* GraphFuser::reuse(std::unordered_map<Value*, Value*>& cache, Value* from) const {
  auto it = cache.find(from);
  if (it == cache.end()) return nullptr;
  // Usable where the block it was made in encloses the insertion point.
  const Block* made_in = it->second->node()->owningBlock();
  for (const Block* b = graph_.insertPoint()->owningBlock(); b != nullptr;
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr) {
    if (b == made_in) return it->second;
  }
  return nullptr;
}

Value* GraphFuser::toArray(const FusedValue& value) {
  if (value.kind == ValueKind::Array) return value.value;
  Value* v = value.value;
  if (value.kind == ValueKind::PerMember) {
    const auto element = v->type()->expectRef<c10::ListType>().getElementType();
    std::vector<Value*> members;
    for (int64_t b = 0; b < array_size_; ++b) members.push_back(memberValue(value, b));
    const FusedValue stacked = stackMembers(members, element);
    TORCH_INTERNAL_ASSERT(stacked.kind == ValueKind::Array, "hfta: per-member ", element->annotation_str(),
                          " values cannot become an array");
    return stacked.value;
  }
  if (value.kind == ValueKind::Folded) {
    if (Value* view = reuse(array_views_, v)) return view;
    return array_views_[v] = graph_.insert(kind::unfold_channels(), {v, array_size_});
  }
  const auto& type = v->type();
  if (type->kind() == c10::TypeKind::TensorType) {
    return graph_.insert(kind::broadcast_to_members(), {v, array_size_});
  }
  if (auto tuple = type->cast<c10::TupleType>(); tuple && containsTensor(type)) {
    Node* unpack = graph_.insertNode(graph_.createTupleUnpack(v));
    std::vector<Value*> elements;
    for (Value* e : unpack->outputs()) elements.push_back(toArray({e, ValueKind::Uniform}));
    return graph_.insertNode(graph_.createTuple(elements))->output();
  }
  if (isStackedAttribute(type) && type->kind() == c10::TypeKind::ListType) {
    return graph_.insert(kind::broadcast_list_to_members(), {v, array_size_});  // List[Tensor]: each element
  }
  if (isTensorLike(type) && !v->mustBeNone()) {
    // Optional[Tensor]: each member's value, or None in all.
    return graph_.insert(kind::broadcast_optional_to_members(), {v, array_size_});
  }
  TORCH_INTERNAL_ASSERT(!containsTensor(type) || type->kind() == c10::TypeKind::OptionalType && v->mustBeNone(),
                        "hfta: cannot broadcast a uniform ", type->annotation_str(), " to members");
  return v;  // non-tensor leaves of an array are uniform
}

FusedValue GraphFuser::stackMembers(const std::vector<Value*>& members, const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::NoneType) return {members[0], ValueKind::Uniform};
  if (auto stacked = hfta::stackMembers(graph_, members, type)) return {*stacked, ValueKind::Array};
  // Anything else differs per member and stays a list of B values.
  return {graph_.insertNode(graph_.createList(type, members))->output(), ValueKind::PerMember};
}

Value* GraphFuser::toArrayOrBroadcast(const FusedValue& value) {
  if (value.kind == ValueKind::Uniform && value.value->type()->kind() == c10::TypeKind::TensorType) {
    return graph_.insert(c10::aten::unsqueeze, {value.value, 0});
  }
  return toArray(value);
}

Value* GraphFuser::toFolded(const FusedValue& value) {
  Value* v = value.value;
  TORCH_INTERNAL_ASSERT(v->type()->kind() == c10::TypeKind::TensorType && value.kind != ValueKind::PerMember,
                        "hfta: only a tensor can be channel-folded");
  if (value.kind == ValueKind::Folded) return v;
  if (Value* copy = reuse(folded_copies_, v)) return copy;
  return folded_copies_[v] = graph_.insert(kind::fold_channels(), {toArrayOrBroadcast(value), array_size_});
}

Value* GraphFuser::toPerMember(const FusedValue& value) {
  if (value.kind == ValueKind::PerMember) return value.value;
  std::vector<Value*> members;
  for (int64_t b = 0; b < array_size_; ++b) members.push_back(memberValue(value, b));
  return graph_.insertNode(graph_.createList(value.value->type(), members))->output();
}

Value* GraphFuser::memberValue(const FusedValue& value, int64_t b) {
  Value* v = value.value;
  switch (value.kind) {
    case ValueKind::Uniform:
      return v;
    case ValueKind::PerMember:
      // The list the fallback built: its element b is member b's value.
      if (v->node()->kind() == c10::prim::ListConstruct) return v->node()->input(b);
      return graph_.insert(c10::aten::__getitem__, {v, b});
    case ValueKind::Folded:
      return memberValue({toArray(value), ValueKind::Array}, b);
    case ValueKind::Array:
      break;
  }
  const auto& type = v->type();
  if (type->kind() == c10::TypeKind::TensorType) return graph_.insert(c10::aten::select, {v, 0, b});
  if (isTensorLike(type)) return graph_.insert(kind::member(), {v, b});
  if (type->kind() == c10::TypeKind::ListType && containsTensor(type)) {
    // Tensor[] and Tensor?[] (aten::index's indices) have typed ops; a list
    // of lists or tuples takes the generic one.
    if (isTensorLike(type->expectRef<c10::ListType>().getElementType())) {
      return graph_.insert(kind::member_list(), {v, b});
    }
    return graph_.insert(kind::member_value(), {v, b});
  }
  if (type->kind() == c10::TypeKind::TupleType) {
    Node* unpack = graph_.insertNode(graph_.createTupleUnpack(v));
    std::vector<Value*> elements;
    for (Value* e : unpack->outputs()) {
      elements.push_back(memberValue({e, containsTensor(e->type()) ? ValueKind::Array : ValueKind::Uniform}, b));
    }
    return graph_.insertNode(graph_.createTuple(elements))->output();
  }
  return v;  // a non-tensor leaf of an array is uniform
}

std::shared_ptr<Graph> fuseMemberGraph(const Graph& tmpl, int64_t array_size, const std::vector<ValueKind>& input_kinds,
                                       FusionReport& report, bool segment_plans) {
  TORCH_INTERNAL_ASSERT(input_kinds.size() == tmpl.inputs().size());
  report.array_size = array_size;
  auto fused = std::make_shared<Graph>();
  GraphFuser fuser(*fused, array_size, report);
  for (size_t i = 0; i < tmpl.inputs().size(); ++i) {
    const Value* original = tmpl.inputs()[i];
    Value* in = fused->addInput(original->hasDebugName() ? original->debugNameBase() : "");
    in->setType(tmpl.inputs()[i]->type());
    fuser.bind(tmpl.inputs()[i], {in, input_kinds[i]});
  }
  // The template is not modified; Block* is non-const in the IR API only.
  Block* body = const_cast<Graph&>(tmpl).block();
  WithInsertPoint guard(fused->block());
  auto outputs = segment_plans ? fuseInSegments(fuser, body, planGraphKey(tmpl, array_size, input_kinds))
                               : fuser.fuseBlock(body, fused->block());
  for (const auto& out : outputs) {
    const bool holds_tensor =
        containsTensor(out.kind == ValueKind::PerMember ? out.value->type()->expectRef<c10::ListType>().getElementType()
                                                        : out.value->type());
    fused->registerOutput(holds_tensor ? fuser.toArray(out) : out.value);
  }
  // F.log_softmax's body branches on `dtype is None` (a constant here);
  // folding such branches (no tensor is folded into a constant) leaves the
  // log-softmax that chainLinearLogSoftmax looks for.
  torch::jit::ConstantPropagationImmutableTypes(fused);
  chainLinearLogSoftmax(fused->block());
  torch::jit::EliminateDeadCode(fused);
  report.layout_conversions = countLayoutConversions(fused->block());
  fused->lint();
  return fused;
}

}  // namespace hfta
