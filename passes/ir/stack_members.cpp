#include "passes/ir/stack_members.h"

#include <algorithm>

#include "runtime/ops/op_kinds.h"

namespace hfta {

using torch::jit::Graph;
using torch::jit::Value;

bool isTensorLike(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  auto opt = type->cast<c10::OptionalType>();
  return opt && opt->getElementType()->kind() == c10::TypeKind::TensorType;
}

std::optional<Value*> stackMembers(Graph& g, const std::vector<Value*>& members, const c10::TypePtr& type) {
  using c10::TypeKind;
  if (type->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(c10::TensorType::get(), members))->output();
    return g.insert(c10::aten::stack, {list, 0});
  }
  if (auto opt = type->cast<c10::OptionalType>(); opt && opt->getElementType()->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(type, members))->output();
    return g.insert(kind::stack_members_optional(), {list});
  }
  if (auto list_type = type->cast<c10::ListType>();
      list_type && list_type->getElementType()->kind() == TypeKind::TensorType) {
    auto* list = g.insertNode(g.createList(type, members))->output();
    return g.insert(kind::stack_members_list(), {list});
  }
  if (auto tuple = type->cast<c10::TupleType>()) {
    const auto& elements = tuple->elements();
    const bool all_tensor_like = std::all_of(elements.begin(), elements.end(), [](const auto& t) {
      return isTensorLike(t) || t->kind() == TypeKind::NoneType;
    });
    if (!all_tensor_like) return std::nullopt;
    std::vector<std::vector<Value*>> per_element(elements.size());
    for (auto* m : members) {
      auto* unpack = g.insertNode(g.createTupleUnpack(m));
      for (size_t e = 0; e < elements.size(); ++e) per_element[e].push_back(unpack->output(e));
    }
    std::vector<Value*> fused;
    for (size_t e = 0; e < elements.size(); ++e) {
      // A None element is None in every member: any member's stands for all.
      auto stacked =
          elements[e]->kind() == TypeKind::NoneType ? per_element[e][0] : stackMembers(g, per_element[e], elements[e]);
      fused.push_back(*stacked);
    }
    return g.insertNode(g.createTuple(fused))->output();
  }
  return std::nullopt;
}

}  // namespace hfta
