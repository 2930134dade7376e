#include "passes/fuse/fallback.h"

#include <fmt/format.h>

#include "passes/ir/diagnostics.h"
#include "passes/ir/walk.h"
#include "passes/ir/writes.h"

namespace hfta {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// A per-member write into a value all members share would make the members
// interfere: refuse it with a clear message.
void checkNoWriteIntoUniform(GraphFuser& fuser, Node* node) {
  for (size_t i : writtenInputs(node)) {
    if (fuser.lookup(node->input(i)).kind == ValueKind::Uniform) {
      throw UserError(
          fmt::format("cannot fuse {}: it writes per-member values into `{}`, which all members share. "
                      "Write into a fresh tensor instead of updating a shared one in place.",
                      describeNode(node), node->input(i)->debugName()));
    }
  }
}

// Stacks member results back into one fused value.
FusedValue combine(Graph& g, const std::vector<Value*>& members, const c10::TypePtr& type) {
  using c10::TypeKind;
  if (type->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(c10::TensorType::get(), members))->output();
    return {g.insert(c10::aten::stack, {list, 0}), ValueKind::Array};
  }
  if (type->kind() == TypeKind::NoneType) return {members[0], ValueKind::Uniform};
  if (auto opt = type->cast<c10::OptionalType>(); opt && opt->getElementType()->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(type, members))->output();
    return {g.insert(c10::Symbol::fromQualString("hfta::stack_members_optional"), {list}), ValueKind::Array};
  }
  if (auto list_type = type->cast<c10::ListType>();
      list_type && list_type->getElementType()->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(type, members))->output();
    return {g.insert(c10::Symbol::fromQualString("hfta::stack_members_list"), {list}), ValueKind::Array};
  }
  if (auto tuple = type->cast<c10::TupleType>()) {
    const auto& elements = tuple->elements();
    const bool all_tensor_like = std::all_of(elements.begin(), elements.end(), [](const auto& t) {
      return isTensorLike(t) || t->kind() == TypeKind::NoneType;
    });
    if (all_tensor_like) {
      std::vector<std::vector<Value*>> per_element(elements.size());
      for (auto* m : members) {
        auto* unpack = g.insertNode(g.createTupleUnpack(m));
        for (size_t e = 0; e < elements.size(); ++e) per_element[e].push_back(unpack->output(e));
      }
      std::vector<Value*> fused;
      for (size_t e = 0; e < elements.size(); ++e) {
        fused.push_back(combine(g, per_element[e], elements[e]).value);
      }
      return {g.insertNode(g.createTuple(fused))->output(), ValueKind::Array};
    }
  }
  // Anything else differs per member and stays a list of B values.
  return {g.insertNode(g.createList(type, members))->output(), ValueKind::PerMember};
}

// Inside a cloned block, a read of a stacked parameter or buffer gives all
// B members: narrow it to member b right where it is read.
void narrowAttributeReads(torch::jit::Block* block, int64_t b) {
  forEachNode(block, [b](Node* read) {
    if (read->kind() != c10::prim::GetAttr || !isTensorLike(read->output()->type())) return;
    Graph& g = *read->owningGraph();
    torch::jit::WithInsertPoint after(read->next());
    Value* stacked = read->output();
    Value* member = stacked->type()->kind() == c10::TypeKind::TensorType
                        ? g.insert(c10::aten::select, {stacked, 0, b})
                        : g.insert(c10::Symbol::fromQualString("hfta::member"), {stacked, b});
    stacked->replaceAllUsesAfterNodeWith(member->node(), member);
  });
}

}  // namespace

void runPerMember(GraphFuser& fuser, Node* node) {
  checkNoWriteIntoUniform(fuser, node);
  Graph& g = fuser.graph();
  std::vector<std::vector<Value*>> outputs(node->outputs().size());
  for (int64_t b = 0; b < fuser.arraySize(); ++b) {
    std::unordered_map<Value*, Value*> slices;  // one slice per value and member
    auto member_of = [&](Value* v) -> Value* {
      auto it = slices.find(v);
      if (it != slices.end()) return it->second;
      return slices[v] = fuser.memberValue(fuser.lookup(v), b);
    };
    Node* copy = g.insertNode(g.createClone(node, member_of));
    for (auto* block : copy->blocks()) narrowAttributeReads(block, b);
    for (size_t i = 0; i < node->outputs().size(); ++i) outputs[i].push_back(copy->output(i));
  }
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    fuser.bind(node->output(i), combine(g, outputs[i], node->output(i)->type()));
  }
}

}  // namespace hfta
