#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "hfta/parallel.h"
#include "passes/fuse/graph_fuser.h"
#include "passes/ir/diagnostics.h"
#include "passes/ir/stack_members.h"
#include "passes/ir/walk.h"
#include "passes/ir/writes.h"
#include "passes/parallel/members.h"
#include "passes/verify/lockstep.h"
#include "runtime/ops/op_kinds.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using namespace parallel;  // NOLINT(google-build-using-namespace): the pass over them
namespace prim = c10::prim;
namespace aten = c10::aten;

bool assignsAttributes(const Block* block) {
  return anyNode(block, [](const Node* node) { return node->kind() == prim::SetAttr; });
}

// A member attribute the fused graph reads.
struct Leaf {
  std::vector<std::string> path;
  bool tensor = false;
  bool written = false;               // a tensor the fused ops update in place
  std::vector<Value*> fused_readers;  // prim::GetAttr nodes' outputs in the fused graph
};

void collectLeaves(Block* block, Value* self, std::map<std::vector<std::string>, Leaf>& leaves) {
  forEachNode(block, [&](Node* node) {
    if (node->kind() != prim::GetAttr || node->output()->type()->cast<c10::ClassType>()) return;
    auto path = pathFrom(self, node->output());
    if (!path) return;
    auto& leaf = leaves[*path];
    leaf.path = *path;
    leaf.tensor = isTensorLike(node->output()->type());
    leaf.fused_readers.push_back(node->output());
  });
}

// What a group becomes: the checks done, the fused graph built; nothing in
// the graph changed yet.
struct Plan {
  std::vector<ValueKind> kinds;  // of the template's inputs
  std::shared_ptr<Graph> fused;  // inputs: the template's, then one per tensor leaf
  std::vector<Leaf> tensor_leaves;
  std::vector<Leaf> flags;     // non-tensor attributes: must be equal in every member
  std::vector<Node*> to_move;  // nodes between the members that read their outputs
  Node* last = nullptr;        // the members' last node
};

// The members' nodes run together after the last of them: what lies
// between them and reads their outputs moves after it, and nothing that
// stays between them may have effects the members could see.
std::optional<std::string> placeAfterMembers(const std::vector<GroupMember>& members,
                                             const std::set<const Node*>& all_regions, const Dependence& deps,
                                             Plan& plan) {
  plan.last = members[0].region.back();
  Node* earliest = members[0].region.front();
  for (const auto& m : members) {
    if (m.region.back()->isAfter(plan.last)) plan.last = m.region.back();
    if (m.region.front()->isBefore(earliest)) earliest = m.region.front();
  }
  for (Node* n = earliest->next(); n != plan.last; n = n->next()) {
    if (all_regions.count(n)) continue;
    if (deps.at(n) != 0) {
      // It reads the members' outputs: it moves after them. Nothing of a
      // member reads it (that would make the member depend on another);
      // effects beyond writing to what it reads would change order.
      if (n->hasSideEffects()) {
        return fmt::format("{} between the members has side effects{}: the members must run in their order",
                           n->kind().toQualString(), sourceLine(n).empty() ? "" : " (" + sourceLine(n) + ")");
      }
      plan.to_move.push_back(n);
    } else if (n->hasSideEffects() || (n->maybeSchema() && n->schema().is_mutable())) {
      return fmt::format("{} between the members has effects they could see{}: the members must run in their order",
                         n->kind().toQualString(), sourceLine(n).empty() ? "" : " (" + sourceLine(n) + ")");
    }
  }

  return std::nullopt;
}

// The members fused by the engine, reading each stacked tensor attribute
// from an input of its own; the other attributes they read become flags.
std::optional<std::string> buildFused(const GroupMember& first, int64_t count, Plan& plan) {
  FusionReport report;
  try {
    plan.fused = fuseMemberGraph(*first.tmpl, count, plan.kinds, report);
  } catch (const UserError& e) {  // the engine refused (bugs surface: the registered pass logs them)
    return std::string(e.what());
  }
  Value* self = plan.fused->inputs()[0];
  std::map<std::vector<std::string>, Leaf> leaves;
  collectLeaves(plan.fused->block(), self, leaves);
  for (auto& [path, leaf] : leaves) {
    if (!leaf.tensor) {
      const auto kind = leaf.fused_readers[0]->type()->kind();
      if (kind != c10::TypeKind::BoolType && kind != c10::TypeKind::IntType && kind != c10::TypeKind::FloatType &&
          kind != c10::TypeKind::StringType) {
        return fmt::format("{}.{} is a {}, which the members are not checked to agree on", first.path,
                           fmt::join(path, "."), leaf.fused_readers[0]->type()->annotation_str());
      }
      plan.flags.push_back(leaf);
      continue;
    }
    // The fused graph reads the stacked tensor from a new input instead.
    Value* stacked = plan.fused->addInput(fmt::format("{}", fmt::join(path, "_")));
    stacked->setType(leaf.fused_readers[0]->type());
    for (Value* reader : leaf.fused_readers) {
      reader->replaceAllUsesWith(stacked);
      reader->node()->destroy();
    }
    std::set<const Value*> aliases{stacked};
    leaf.written = writesTo(plan.fused->block(), aliases);
    leaf.fused_readers.clear();
    plan.tensor_leaves.push_back(leaf);
  }
  torch::jit::EliminateDeadCode(plan.fused);
  return std::nullopt;
}

// Why the group cannot be fused, or nothing (and `plan` filled in).
std::optional<std::string> planGroup(Graph& graph, std::vector<GroupMember>& members, Plan& plan) {
  const size_t count = members.size();
  if (count > kMaxMembers) return fmt::format("more than {} members", kMaxMembers);
  const auto deps = dependence(graph, members);
  if (auto why = whyDependent(graph, members, deps)) return why;
  std::set<const Node*> all_regions = findRegions(graph, members, deps);
  const bool trivial = std::all_of(members.begin(), members.end(), [](const GroupMember& m) {
    return std::all_of(m.region.begin(), m.region.end(), [](Node* n) { return n->kind() == prim::GetAttr; });
  });
  if (trivial) return std::string();  // nothing to fuse: not worth a line
  for (const auto& m : members) {
    if (m.region.empty()) return fmt::format("{} computes nothing of its own, unlike {}", m.path, members[0].path);
  }
  if (auto why = placeAfterMembers(members, all_regions, deps, plan)) return why;

  std::vector<MemberGraph> graphs;
  for (auto& m : members) {
    extract(graph, m, all_regions);
    graphs.push_back({m.tmpl, m.path});
  }
  try {
    verifyGraphsInLockstep(graphs);
  } catch (const UserError& e) {
    return std::string(e.what());
  }
  const auto& first = members[0];
  const std::set<const Node*> moving(plan.to_move.begin(), plan.to_move.end());
  for (const auto& m : members) {
    if (m.inputs.size() != first.inputs.size() || m.outputs.size() != first.outputs.size()) {
      return fmt::format("{} and {} read or give a different number of values", first.path, m.path);
    }
    for (Value* v : m.inputs) {
      if (moving.count(v->node())) {
        return fmt::format("{} reads {}, which must run after all the members", m.path,
                           v->node()->kind().toQualString());
      }
    }
  }
  if (first.outputs.empty()) return fmt::format("{} computes nothing the rest of the graph reads", first.path);
  for (Value* out : first.outputs) {
    if (out->type()->kind() != c10::TypeKind::TensorType) {
      return fmt::format("{} gives a {} to the rest of the graph; only tensors are sliced back", first.path,
                         out->type()->annotation_str());
    }
  }
  if (assignsAttributes(first.tmpl->block())) return fmt::format("{} assigns a module attribute", first.path);
  plan.kinds = {ValueKind::Uniform};
  std::set<const Value*> tensor_inputs;
  for (size_t k = 0; k < first.inputs.size(); ++k) {
    Value* v = first.inputs[k];
    if (v->type()->cast<c10::ClassType>()) {
      return fmt::format("{} reads another module ({}), which cannot be stacked", first.path,
                         v->type()->annotation_str());
    }
    const bool shared =
        std::all_of(members.begin(), members.end(), [&](const GroupMember& m) { return m.inputs[k] == v; });
    if (!shared && v->type()->kind() != c10::TypeKind::TensorType) {
      return fmt::format("the members read different values of type {} ({} reads %{})", v->type()->annotation_str(),
                         first.path, v->debugName());
    }
    plan.kinds.push_back(shared ? ValueKind::Uniform : ValueKind::Array);
    if (containsTensor(v->type())) tensor_inputs.insert(first.tmpl->inputs()[k + 1]);
  }
  if (auto why = whyWritesItsInput(first.tmpl->block(), tensor_inputs, first.path)) return why;

  return buildFused(first, static_cast<int64_t>(count), plan);
}

Value* attribute(Graph& graph, Value* module, const std::vector<std::string>& path) {
  for (const auto& name : path) module = graph.insertGetAttr(module, name);
  return module;
}

// One tensor of the members' tensors; None if they are None (an
// Optional[Tensor] attribute such as a convolution's bias).
Value* stackValues(Graph& graph, const std::vector<Value*>& values) {
  return *stackMembers(graph, values, values[0]->type());
}

// `value` as a Tensor where the guard made sure it is not None.
Value* asTensor(Graph& graph, Value* value) {
  return value->type()->kind() == c10::TypeKind::TensorType ? value
                                                            : graph.insertUncheckedCast(value, c10::TensorType::get());
}

// The members' tensor attributes, one list per leaf: values[leaf][member].
std::vector<std::vector<Value*>> leafValues(Graph& graph, const std::vector<GroupMember>& members, const Plan& plan) {
  std::vector<std::vector<Value*>> values;
  for (const auto& leaf : plan.tensor_leaves) {
    values.emplace_back();
    for (const auto& m : members) values.back().push_back(attribute(graph, m.modules[0], leaf.path));
  }
  return values;
}

// Whether the fused branch may run: the members' tensors stackable (their
// own: distinct), buffers written back present, flags equal.
Value* insertGuard(Graph& graph, const std::vector<GroupMember>& members, const Plan& plan,
                   const std::vector<std::vector<Value*>>& leaf_values) {
  const auto count = static_cast<int64_t>(members.size());
  auto stackable = [&](const std::vector<Value*>& tensors, bool distinct) {
    Value* list = graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), tensors))->output();
    return graph.insert(kind::stackable(), {list, count, distinct});
  };
  std::vector<Value*> attributes, inputs;
  for (const auto& values : leaf_values) attributes.insert(attributes.end(), values.begin(), values.end());
  for (size_t k = 0; k + 1 < plan.kinds.size(); ++k) {
    if (plan.kinds[k + 1] != ValueKind::Array) continue;
    for (const auto& m : members) inputs.push_back(m.inputs[k]);
  }
  Value* ok = stackable(attributes, true);
  if (!inputs.empty()) ok = graph.insert(aten::__and__, {ok, stackable(inputs, false)});
  for (size_t l = 0; l < plan.tensor_leaves.size(); ++l) {
    if (!plan.tensor_leaves[l].written || leaf_values[l][0]->type()->kind() == c10::TypeKind::TensorType) continue;
    for (Value* v : leaf_values[l]) {
      ok = graph.insert(aten::__and__, {ok, graph.insert(aten::__isnot__, {v, graph.insertConstant(c10::IValue())})});
    }
  }
  for (const auto& flag : plan.flags) {
    Value* reference = attribute(graph, members[0].modules[0], flag.path);
    for (int64_t b = 1; b < count; ++b) {
      Value* same = graph.insert(aten::eq, {reference, attribute(graph, members[b].modules[0], flag.path)});
      ok = graph.insert(aten::__and__, {ok, same});
    }
  }
  return ok;
}

// The fused branch: stacked inputs and attributes, the fused graph, the
// updated buffers copied back, each member's slices of the outputs.
void fillFused(Graph& graph, Block* block, const std::vector<GroupMember>& members, const Plan& plan,
               const std::vector<std::vector<Value*>>& leaf_values) {
  torch::jit::WithInsertPoint in_block(block);
  const auto count = static_cast<int64_t>(members.size());
  std::vector<Value*> fused_inputs{members[0].modules[0]};
  for (size_t k = 0; k + 1 < plan.kinds.size(); ++k) {
    if (plan.kinds[k + 1] == ValueKind::Uniform) {
      fused_inputs.push_back(members[0].inputs[k]);
    } else {
      std::vector<Value*> per_member;
      for (const auto& m : members) per_member.push_back(m.inputs[k]);
      fused_inputs.push_back(stackValues(graph, per_member));
    }
  }
  std::vector<Value*> stacked_leaves;
  for (const auto& values : leaf_values) stacked_leaves.push_back(stackValues(graph, values));
  fused_inputs.insert(fused_inputs.end(), stacked_leaves.begin(), stacked_leaves.end());
  const auto fused_outputs = torch::jit::insertGraph(graph, *plan.fused, fused_inputs);
  for (size_t l = 0; l < plan.tensor_leaves.size(); ++l) {
    if (!plan.tensor_leaves[l].written) continue;
    for (int64_t b = 0; b < count; ++b) {
      graph.insert(aten::copy_, {asTensor(graph, leaf_values[l][b]),
                                 graph.insert(aten::select, {asTensor(graph, stacked_leaves[l]), 0, b})});
    }
  }
  std::vector<Node*> slices;
  for (Value* out : fused_outputs) {
    slices.push_back(graph.insertNode(graph.createListUnpack(graph.insert(aten::unbind, {out, 0}), count)));
  }
  for (int64_t b = 0; b < count; ++b) {
    for (Node* slice : slices) block->registerOutput(slice->output(b));
  }
}

// The other branch: the members' nodes as they were.
void fillOriginal(Graph& graph, Block* block, const std::vector<GroupMember>& members,
                  const std::vector<Node*>& region_nodes) {
  std::unordered_map<Value*, Value*> env;
  for (Node* node : region_nodes) {
    Node* copy = block->appendNode(graph.createClone(node, [&](Value* v) {
      auto it = env.find(v);
      return it != env.end() ? it->second : v;
    }));
    for (size_t i = 0; i < node->outputs().size(); ++i) env[node->output(i)] = copy->output(i);
  }
  for (const auto& m : members) {
    for (Value* out : m.outputs) block->registerOutput(env.at(out));
  }
}

// Replaces the members' nodes with prim::If(the members agree) { fused }
// else { the members' nodes as they were }.
void rewrite(Graph& graph, std::vector<GroupMember>& members, Plan& plan) {
  // (AliasDb would refuse these moves past any write to a module buffer:
  // it cannot tell the buffers from the tensors in the moved lists.)
  for (auto it = plan.to_move.rbegin(); it != plan.to_move.rend(); ++it) (*it)->moveAfter(plan.last);
  torch::jit::WithInsertPoint after_members(plan.last->next());
  const auto leaf_values = leafValues(graph, members, plan);
  Node* branch = graph.insertNode(graph.create(prim::If, {insertGuard(graph, members, plan, leaf_values)}, 0));
  for (const auto& m : members) {
    for (Value* out : m.outputs) branch->addOutput()->setType(out->type());
  }
  std::vector<Node*> region_nodes;
  for (const auto& m : members) region_nodes.insert(region_nodes.end(), m.region.begin(), m.region.end());
  std::sort(region_nodes.begin(), region_nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  fillFused(graph, branch->addBlock(), members, plan, leaf_values);
  fillOriginal(graph, branch->addBlock(), members, region_nodes);

  // The rest of the graph reads the branch's outputs.
  const std::set<const Node*> in_regions(region_nodes.begin(), region_nodes.end());
  size_t index = 0;
  for (const auto& m : members) {
    for (Value* out : m.outputs) {
      const auto uses = out->uses();
      for (const auto& use : uses) {
        if (!in_regions.count(topLevel(use.user, graph.block()))) {
          use.user->replaceInput(use.offset, branch->output(index));
        }
      }
      ++index;
    }
  }
  for (auto it = region_nodes.rbegin(); it != region_nodes.rend(); ++it) (*it)->destroy();
}

// The profiling executor's prim::profile nodes (left in when it profiled
// nothing) stand between every value and its uses; read through them.
void removeProfileNodes(Block* block) {
  forEachNode(block, [](Node* node) {
    if (node->kind() == prim::profile && node->inputs().size() == 1 && node->outputs().size() == 1) {
      node->output()->replaceAllUsesWith(node->input());
      node->destroy();
    }
  });
}

}  // namespace

std::string ParallelGraphFusionReport::text() const {
  std::string out = fmt::format("parallel graph fusion: {} group(s) fused, {} left\n", fused.size(), left.size());
  for (size_t k = 0; k < fused.size(); ++k) {
    out += fmt::format("  prim::If #{} (fused, guarded) <- {} ({} input)\n", k, fmt::join(fused[k].members, ", "),
                       fused[k].shared_input ? "shared" : "own");
  }
  for (const auto& why : left) out += fmt::format("  why not: {}\n", why);
  return out;
}

ParallelGraphFusionReport fuseParallelGraph(const std::shared_ptr<Graph>& graph) {
  ParallelGraphFusionReport report;
  if (graph->inputs().empty() || !graph->inputs()[0]->type()->cast<c10::ClassType>()) return report;
  removeProfileNodes(graph->block());
  std::set<std::string> seen;
  // Each rewrite removes nodes, so the groups are found again after it.
  for (bool rewritten = true; rewritten;) {
    rewritten = false;
    std::vector<std::string> mixed;
    for (auto& members : findGroups(*graph, mixed)) {
      const std::string paths = joinPaths(members);
      if (!seen.insert(paths).second) continue;
      Plan plan;
      auto why = planGroup(*graph, members, plan);
      if (why) {
        if (!why->empty()) report.left.push_back(fmt::format("{}: {}", paths, *why));
        continue;
      }
      rewrite(*graph, members, plan);
      const bool shared =
          std::all_of(plan.kinds.begin(), plan.kinds.end(), [](ValueKind k) { return k == ValueKind::Uniform; });
      report.fused.push_back({{}, shared});
      for (const auto& m : members) report.fused.back().members.push_back(m.path);
      rewritten = true;
      break;
    }
    // (Only once nothing changes: siblings inside a fused group are gone.)
    for (auto& line : rewritten ? std::vector<std::string>() : mixed) {
      if (seen.insert(line).second) report.left.push_back(line);
    }
  }
  return report;
}

}  // namespace hfta
