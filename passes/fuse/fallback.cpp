#include "passes/fuse/fallback.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "passes/ir/diagnostics.h"
#include "passes/ir/walk.h"
#include "passes/ir/writes.h"
#include "runtime/ops/op_kinds.h"
#include "support/torch_types.h"

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

// Ops whose outputs' sizes follow the data, so that members' outputs may
// not stack: a packed sequence's data and batch sizes (each member packs
// its own lengths), the elements a mask selects.
bool makesRaggedTensors(const Node* node) {
  static const std::unordered_set<c10::Symbol> kKinds{c10::Symbol::fromQualString("aten::_pack_padded_sequence"),
                                                      c10::aten::nonzero, c10::aten::masked_select};
  return kKinds.count(node->kind()) > 0;
}

// Ops that give ragged inputs a shape again: a packed sequence padded back
// (to total_length, or to the longest sequence, which members may share).
bool padsRaggedTensors(const Node* node) {
  return node->kind() == c10::Symbol::fromQualString("aten::_pad_packed_sequence");
}

}  // namespace

void narrowAttributeReads(torch::jit::Block* block, int64_t b) {
  forEachNode(block, [b](Node* read) {
    if (read->kind() != c10::prim::GetAttr || !isStackedAttribute(read->output()->type())) return;
    Graph& g = *read->owningGraph();
    torch::jit::WithInsertPoint after(read->next());
    Value* stacked = read->output();
    const auto kind = stacked->type()->kind();
    Value* member = kind == c10::TypeKind::TensorType ? g.insert(c10::aten::select, {stacked, 0, b})
                    : kind == c10::TypeKind::ListType ? g.insert(kind::member_list(), {stacked, b})
                                                      : g.insert(kind::member(), {stacked, b});
    stacked->replaceAllUsesAfterNodeWith(member->node(), member);
  });
}

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
  // Ragged values stay B values (a stack would fail where their sizes
  // differ), and so does what is computed from them, until an op pads them.
  const bool reads_ragged =
      std::any_of(node->inputs().begin(), node->inputs().end(), [&](const Value* v) { return fuser.isRagged(v); });
  const bool ragged = makesRaggedTensors(node) || (reads_ragged && !padsRaggedTensors(node));
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const auto& type = node->output(i)->type();
    if (ragged && containsTensor(type)) {
      fuser.bind(node->output(i), {g.insertNode(g.createList(type, outputs[i]))->output(), ValueKind::PerMember});
      fuser.markRagged(node->output(i));
    } else if (node->blocks().empty()) {
      fuser.bind(node->output(i), fuser.stackMembers(outputs[i], type));
    } else {
      // Control flow may leave an output without a value in a member that
      // took another path (TorchScript's prim::Uninitialized, on paths that
      // return early or raise): stacked only where an op reads it.
      fuser.bind(node->output(i), {g.insertNode(g.createList(type, outputs[i]))->output(), ValueKind::PerMember});
    }
  }
}

}  // namespace hfta
