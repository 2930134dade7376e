#include "passes/parallel_graph_fusion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "passes/diagnostics.h"
#include "passes/graph_fuser.h"
#include "passes/lockstep.h"
#include "passes/writes.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;
namespace aten = c10::aten;

// Which members of a group a node depends on, one bit per member.
using MemberSet = uint64_t;
constexpr size_t kMaxMembers = 63;
// Marks a node that depends on a member's write to what the member did not
// compute: it belongs to no member.
constexpr MemberSet kForeignWrite = MemberSet{1} << 63;

struct Member {
  // A submodule, reached from the graph's self by prim::GetAttr (by several
  // chains where the graph reads it more than once; the first defined first).
  std::vector<Value*> modules;
  std::string path;  // e.g. members.0
  std::vector<Node*> region;
  // The region as a graph of its own (input 0: the member), what it reads
  // from the rest of the graph (inputs 1...) and what the rest reads of it.
  std::shared_ptr<Graph> tmpl;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
};

// The attribute names from the graph's self to `value`, or nothing if
// `value` is not reached that way.
std::optional<std::vector<std::string>> pathFrom(Value* root, Value* value) {
  std::vector<std::string> names;
  while (value != root) {
    if (value->node()->kind() != prim::GetAttr) return std::nullopt;
    names.insert(names.begin(), value->node()->s(torch::jit::attr::name));
    value = value->node()->input(0);
  }
  return names;
}

Node* topLevel(Node* node, const Block* top) {
  while (node->owningBlock() != top) node = node->owningBlock()->owningNode();
  return node;
}

// The values `node` reads, its blocks' nodes included.
void reads(Node* node, std::vector<Value*>& out) {
  out.insert(out.end(), node->inputs().begin(), node->inputs().end());
  for (Block* block : node->blocks()) {
    for (Node* inner : block->nodes()) reads(inner, out);
    out.insert(out.end(), block->outputs().begin(), block->outputs().end());
  }
}

bool writesOutside(Node* node, const std::unordered_map<const Node*, MemberSet>& deps, MemberSet own) {
  const auto* schema = node->maybeSchema();
  if (schema == nullptr) return false;
  const auto& args = schema->arguments();
  for (size_t i = 0; i < args.size() && i < node->inputs().size(); ++i) {
    const auto* info = args[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    auto producer = deps.find(node->input(i)->node());
    if (producer == deps.end() || producer->second != own) return true;
  }
  return false;
}

// For each node of the top block: the members it depends on.
std::unordered_map<const Node*, MemberSet> dependence(Graph& graph, const std::vector<Member>& members) {
  std::unordered_map<const Value*, MemberSet> roots;
  for (size_t b = 0; b < members.size(); ++b) {
    for (Value* module : members[b].modules) roots[module] = MemberSet{1} << b;
  }
  std::unordered_map<const Node*, MemberSet> deps;
  for (Node* node : graph.nodes()) {
    MemberSet set = 0;
    std::vector<Value*> values;
    reads(node, values);
    for (Value* v : values) {
      if (auto root = roots.find(v); root != roots.end()) set |= root->second;
      Node* producer = topLevel(v->node(), graph.block());
      if (producer == node) continue;  // defined in the node's own blocks
      if (auto d = deps.find(producer); d != deps.end()) set |= d->second;
    }
    // A node of one member that writes to what it did not compute (appends
    // to a list the members share, say) is the rest of the graph's step,
    // not the member's: it runs after the members.
    if (__builtin_popcountll(set) == 1 && writesOutside(node, deps, set)) set |= kForeignWrite;
    deps[node] = set;
    // What reads a value after this node wrote to it depends on what this
    // node depends on: so does the value's producer, from now on.
    if (const auto* schema = node->maybeSchema()) {
      for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
        const auto* info = schema->arguments()[i].alias_info();
        if (info == nullptr || !info->isWrite()) continue;
        if (auto p = deps.find(node->input(i)->node()); p != deps.end()) p->second |= set;
      }
    }
  }
  return deps;
}

// Copies `member.region` into a graph of its own and records what it reads
// and what is read of it.
void extract(Graph& graph, Member& member, const std::set<const Node*>& all_regions) {
  auto tmpl = std::make_shared<Graph>();
  std::unordered_map<Value*, Value*> env;
  Value* self = tmpl->addInput("self")->setType(member.modules[0]->type());
  for (Value* module : member.modules) env[module] = self;
  auto outer = [&](Value* v) -> Value* {
    if (auto it = env.find(v); it != env.end()) return it->second;
    if (v->node()->kind() == prim::Constant) {
      Node* constant = tmpl->appendNode(tmpl->createClone(v->node(), [](Value* x) { return x; }));
      return env[v] = constant->output();
    }
    member.inputs.push_back(v);
    return env[v] = tmpl->addInput(v->hasDebugName() ? v->debugNameBase() : "")->setType(v->type());
  };
  for (Node* node : member.region) {
    Node* copy = tmpl->appendNode(tmpl->createClone(node, outer));
    for (size_t i = 0; i < node->outputs().size(); ++i) env[node->output(i)] = copy->output(i);
  }
  for (Node* node : member.region) {
    for (Value* out : node->outputs()) {
      const bool read_outside = std::any_of(out->uses().begin(), out->uses().end(), [&](const torch::jit::Use& u) {
        return !all_regions.count(topLevel(u.user, graph.block()));
      });
      if (read_outside) {
        member.outputs.push_back(out);
        tmpl->registerOutput(env.at(out));
      }
    }
  }
  member.tmpl = tmpl;
}

bool assignsAttributes(const Block* block) {
  for (const Node* node : block->nodes()) {
    if (node->kind() == prim::SetAttr) return true;
    for (const Block* inner : node->blocks()) {
      if (assignsAttributes(inner)) return true;
    }
  }
  return false;
}

// A member attribute the fused graph reads.
struct Leaf {
  std::vector<std::string> path;
  bool tensor = false;
  bool written = false;                // a tensor the fused ops update in place
  std::vector<Value*> fused_readers;   // prim::GetAttr nodes' outputs in the fused graph
};

void collectLeaves(Block* block, Value* self, std::map<std::vector<std::string>, Leaf>& leaves) {
  for (Node* node : block->nodes()) {
    for (Block* inner : node->blocks()) collectLeaves(inner, self, leaves);
    if (node->kind() != prim::GetAttr || node->output()->type()->cast<c10::ClassType>()) continue;
    auto path = pathFrom(self, node->output());
    if (!path) continue;
    auto& leaf = leaves[*path];
    leaf.path = *path;
    leaf.tensor = isTensorLike(node->output()->type());
    leaf.fused_readers.push_back(node->output());
  }
}

// What a group becomes: the checks done, the fused graph built; nothing in
// the graph changed yet.
struct Plan {
  std::vector<ValueKind> kinds;  // of the template's inputs
  std::shared_ptr<Graph> fused;  // inputs: the template's, then one per tensor leaf
  std::vector<Leaf> tensor_leaves;
  std::vector<Leaf> flags;       // non-tensor attributes: must be equal in every member
  std::vector<Node*> to_move;    // nodes between the members that read their outputs
  Node* last = nullptr;          // the members' last node
};

std::string joinPaths(const std::vector<Member>& members) {
  std::vector<std::string> paths;
  for (const auto& m : members) paths.push_back(m.path);
  return fmt::format("{}", fmt::join(paths, ", "));
}

// Whether `node` came from inlining a call of a method of a module of type
// `member_type` (the outermost call it was inlined from): the members' own
// nodes, not what their caller does with their outputs.
bool inlinedFrom(const Node* node, const c10::Type* member_type) {
  const auto callstack = node->callstack();
  if (!callstack) return false;
  const auto module = (*callstack)->module_instance();
  return module && module->class_type().get() == member_type;
}

// Why the members cannot run side by side (a node reads one member's
// attributes and depends on another), or nothing.
std::optional<std::string> whyDependent(Graph& graph, const std::vector<Member>& members,
                                        const std::unordered_map<const Node*, MemberSet>& deps) {
  const size_t count = members.size();
  for (Node* node : graph.nodes()) {
    const MemberSet set = deps.at(node);
    if (__builtin_popcountll(set) < 2) continue;
    if (set & kForeignWrite && __builtin_popcountll(set) == 2 && writesOutside(node, deps, set & ~kForeignWrite)) {
      for (size_t b = 0; b < count; ++b) {
        if (set >> b & 1) {
          return fmt::format("{} writes in place to what it did not compute ({}{}): the members must run in "
                             "their order", members[b].path, node->kind().toQualString(),
                             sourceLine(node).empty() ? "" : " at " + sourceLine(node));
        }
      }
    }
    std::vector<Value*> values;
    reads(node, values);
    for (size_t b = 0; b < count; ++b) {
      const bool reads_member = std::any_of(values.begin(), values.end(), [&](Value* v) {
        const auto& modules = members[b].modules;
        return std::count(modules.begin(), modules.end(), v) || (v->node()->kind() == prim::GetAttr &&
                                          deps.count(v->node()) && deps.at(v->node()) == (MemberSet{1} << b));
      });
      if (!reads_member) continue;
      for (size_t a = 0; a < count; ++a) {
        if (a != b && (set >> a & 1)) {
          return fmt::format("{} reads what {} computes (a data dependence between members)", members[b].path,
                             members[a].path);
        }
      }
    }
  }
  return std::nullopt;
}

// Why the group cannot be fused, or nothing (and `plan` filled in).
std::optional<std::string> planGroup(Graph& graph, std::vector<Member>& members, Plan& plan) {
  const size_t count = members.size();
  if (count > kMaxMembers) return fmt::format("more than {} members", kMaxMembers);
  const auto deps = dependence(graph, members);
  if (auto why = whyDependent(graph, members, deps)) return why;
  std::set<const Node*> all_regions;
  const c10::Type* member_type = members[0].modules[0]->type().get();
  for (Node* node : graph.nodes()) {
    const MemberSet set = deps.at(node);
    for (size_t b = 0; b < count; ++b) {
      if (set == (MemberSet{1} << b)) {
        members[b].region.push_back(node);
        all_regions.insert(node);
      }
    }
  }
  // The rest of the graph's: a member's node whose non-tensor result the
  // rest of the graph reads (a list the members' outputs go into), and the
  // caller's nodes at the end of a region (what it does with a member's
  // output: the first member's step of a sum over members).
  for (auto& m : members) {
    const std::set<const Node*> original(m.region.begin(), m.region.end());
    std::set<const Node*> in_region = original;
    auto read_outside = [&](Value* out, const std::set<const Node*>& region) {
      return std::any_of(out->uses().begin(), out->uses().end(), [&](const torch::jit::Use& u) {
        return !region.count(topLevel(u.user, graph.block()));
      });
    };
    for (auto it = m.region.rbegin(); it != m.region.rend();) {
      Node* node = *it;
      const bool shared_container = std::any_of(node->outputs().begin(), node->outputs().end(), [&](Value* out) {
        return out->type()->kind() != c10::TypeKind::TensorType && read_outside(out, original);
      });
      // (Inlining leaves nodes without outputs without a call stack.)
      const bool callers_tail = node->outputs().size() > 0 && !inlinedFrom(node, member_type) &&
                                std::all_of(node->outputs().begin(), node->outputs().end(),
                                            [&](Value* out) { return read_outside(out, in_region); });
      if (shared_container || callers_tail) {
        in_region.erase(node);
        all_regions.erase(node);
        it = decltype(it)(m.region.erase(std::next(it).base()));
      } else {
        ++it;
      }
    }
  }
  const bool trivial = std::all_of(members.begin(), members.end(), [](const Member& m) {
    return std::all_of(m.region.begin(), m.region.end(), [](Node* n) { return n->kind() == prim::GetAttr; });
  });
  if (trivial) return std::string();  // nothing to fuse: not worth a line
  for (const auto& m : members) {
    if (m.region.empty()) return fmt::format("{} computes nothing of its own, unlike {}", m.path, members[0].path);
  }
  // The members' nodes run together after the last of them: what lies
  // between them and reads their outputs moves after it, and nothing that
  // stays between them may have effects the members could see.
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
        return fmt::format("{} reads {}, which must run after all the members", m.path, v->node()->kind().toQualString());
      }
    }
  }
  if (first.outputs.empty()) return fmt::format("{} computes nothing the rest of the graph reads", first.path);
  for (Value* out : first.outputs) {
    if (out->type()->kind() != c10::TypeKind::TensorType) {
      return fmt::format("{} gives a {} to the rest of the graph; only tensors are sliced back",
                         first.path, out->type()->annotation_str());
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
    const bool shared = std::all_of(members.begin(), members.end(), [&](const Member& m) { return m.inputs[k] == v; });
    if (!shared && v->type()->kind() != c10::TypeKind::TensorType) {
      return fmt::format("the members read different values of type {} ({} reads %{})", v->type()->annotation_str(),
                         first.path, v->debugName());
    }
    plan.kinds.push_back(shared ? ValueKind::Uniform : ValueKind::Array);
    if (containsTensor(v->type())) tensor_inputs.insert(first.tmpl->inputs()[k + 1]);
  }
  if (writesTo(first.tmpl->block(), tensor_inputs)) {
    return fmt::format("{} writes in place to its input (which other members may read): "
                       "the members must run in their order", first.path);
  }

  FusionReport report;
  try {
    plan.fused = fuseMemberGraph(*first.tmpl, static_cast<int64_t>(count), plan.kinds, report);
  } catch (const std::exception& e) {
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

Value* attribute(Graph& graph, Value* module, const std::vector<std::string>& path) {
  for (const auto& name : path) module = graph.insertGetAttr(module, name);
  return module;
}

// One tensor of the members' tensors; None if they are None (an
// Optional[Tensor] attribute such as a convolution's bias).
Value* stackValues(Graph& graph, const std::vector<Value*>& values) {
  if (values[0]->type()->kind() == c10::TypeKind::TensorType) {
    return graph.insert(aten::stack, {graph.insertNode(graph.createList(c10::TensorType::get(), values))->output(), 0});
  }
  Value* list = graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), values))->output();
  return graph.insert(c10::Symbol::fromQualString("hfta::stack_members_optional"), {list});
}

// `value` as a Tensor where the guard made sure it is not None.
Value* asTensor(Graph& graph, Value* value) {
  return value->type()->kind() == c10::TypeKind::TensorType ? value
                                                             : graph.insertUncheckedCast(value, c10::TensorType::get());
}

// Replaces the members' nodes with prim::If(the members agree) { fused }
// else { the members' nodes as they were }.
void rewrite(Graph& graph, std::vector<Member>& members, Plan& plan) {
  const auto count = static_cast<int64_t>(members.size());
  // (AliasDb would refuse these moves past any write to a module buffer:
  // it cannot tell the buffers from the tensors in the moved lists.)
  for (auto it = plan.to_move.rbegin(); it != plan.to_move.rend(); ++it) (*it)->moveAfter(plan.last);
  torch::jit::WithInsertPoint after_members(plan.last->next());

  // The guard: stackable tensors (the members' own: distinct), equal flags.
  auto stackable = [&](const std::vector<Value*>& tensors, bool distinct) {
    Value* list = graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), tensors))->output();
    return graph.insert(c10::Symbol::fromQualString("hfta::stackable"), {list, count, distinct});
  };
  std::vector<Value*> attributes, inputs;
  std::vector<std::vector<Value*>> leaf_values;
  for (const auto& leaf : plan.tensor_leaves) {
    leaf_values.emplace_back();
    for (auto& m : members) leaf_values.back().push_back(attribute(graph, m.modules[0], leaf.path));
    attributes.insert(attributes.end(), leaf_values.back().begin(), leaf_values.back().end());
  }
  for (size_t k = 0; k + 1 < plan.kinds.size(); ++k) {
    if (plan.kinds[k + 1] != ValueKind::Array) continue;
    for (auto& m : members) inputs.push_back(m.inputs[k]);
  }
  Value* ok = stackable(attributes, true);
  if (!inputs.empty()) ok = graph.insert(aten::__and__, {ok, stackable(inputs, false)});
  // Buffers written back must be there (not None) to be written to.
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

  const size_t outputs = members[0].outputs.size();
  Node* branch = graph.insertNode(graph.create(prim::If, {ok}, 0));
  Block* fused_block = branch->addBlock();
  Block* original_block = branch->addBlock();
  for (const auto& m : members) {
    for (Value* out : m.outputs) branch->addOutput()->setType(out->type());
  }
  {
    torch::jit::WithInsertPoint in_fused(fused_block);
    std::vector<Value*> inputs{members[0].modules[0]};
    for (size_t k = 0; k + 1 < plan.kinds.size(); ++k) {
      if (plan.kinds[k + 1] == ValueKind::Uniform) {
        inputs.push_back(members[0].inputs[k]);
      } else {
        std::vector<Value*> per_member;
        for (auto& m : members) per_member.push_back(m.inputs[k]);
        inputs.push_back(stackValues(graph, per_member));
      }
    }
    std::vector<Value*> stacked_leaves;
    for (const auto& values : leaf_values) stacked_leaves.push_back(stackValues(graph, values));
    inputs.insert(inputs.end(), stacked_leaves.begin(), stacked_leaves.end());
    const auto fused_outputs = torch::jit::insertGraph(graph, *plan.fused, inputs);
    // Buffers the fused ops updated (batch-norm statistics) go back to
    // their members.
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
      for (size_t k = 0; k < outputs; ++k) fused_block->registerOutput(slices[k]->output(b));
    }
  }
  std::vector<Node*> region_nodes;
  for (const auto& m : members) region_nodes.insert(region_nodes.end(), m.region.begin(), m.region.end());
  std::sort(region_nodes.begin(), region_nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  std::unordered_map<Value*, Value*> env;
  for (Node* node : region_nodes) {
    Node* copy = original_block->appendNode(graph.createClone(node, [&](Value* v) {
      auto it = env.find(v);
      return it != env.end() ? it->second : v;
    }));
    for (size_t i = 0; i < node->outputs().size(); ++i) env[node->output(i)] = copy->output(i);
  }
  for (const auto& m : members) {
    for (Value* out : m.outputs) original_block->registerOutput(env.at(out));
  }

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

// Sibling submodules of one type, in the order the graph first reads them.
// Siblings of one class but several types, which run side by side, go to
// `mixed` as a line saying why they are not fused.
std::vector<std::vector<Member>> findGroups(Graph& graph, std::vector<std::string>& mixed) {
  Value* self = graph.inputs()[0];
  std::map<std::pair<std::string, const c10::Type*>, size_t> index;  // (parent's path, type) -> group
  std::map<std::string, std::pair<size_t, size_t>> known;            // path -> (group, member)
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> classes;  // (parent, class) -> groups
  std::vector<std::vector<Member>> groups;
  for (Node* node : graph.nodes()) {
    if (node->kind() != prim::GetAttr) continue;
    auto cls = node->output()->type()->cast<c10::ClassType>();
    auto path = pathFrom(self, node->output());
    if (!cls || !cls->name() || !path) continue;
    const std::string name = fmt::format("{}", fmt::join(*path, "."));
    if (auto it = known.find(name); it != known.end()) {
      groups[it->second.first][it->second.second].modules.push_back(node->output());
      continue;
    }
    path->pop_back();
    const std::string parent = fmt::format("{}", fmt::join(*path, "."));
    auto [it, fresh] = index.emplace(std::make_pair(parent, cls.get()), groups.size());
    if (fresh) {
      groups.emplace_back();
      classes[{parent, withoutMangling(cls->name()->qualifiedName())}].push_back(it->second);
    }
    known[name] = {it->second, groups[it->second].size()};
    groups[it->second].push_back({{node->output()}, name});
  }
  for (const auto& [key, indices] : classes) {
    if (indices.size() < 2) continue;
    std::vector<Member> siblings;
    for (size_t i : indices) siblings.insert(siblings.end(), groups[i].begin(), groups[i].end());
    if (siblings.size() > kMaxMembers || whyDependent(graph, siblings, dependence(graph, siblings))) continue;
    mixed.push_back(fmt::format("{}: submodules of class {} of {} different TorchScript types (different "
                                "constants, such as layer sizes): only members of one type are fused",
                                joinPaths(siblings), key.second, indices.size()));
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.size() < 2; }),
               groups.end());
  return groups;
}

// The profiling executor's prim::profile nodes (left in when it profiled
// nothing) stand between every value and its uses; read through them.
void removeProfileNodes(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* inner : node->blocks()) removeProfileNodes(inner);
    if (node->kind() == prim::profile && node->inputs().size() == 1 && node->outputs().size() == 1) {
      node->output()->replaceAllUsesWith(node->input());
      node->destroy();
    }
  }
}

}  // namespace

ParallelFusionReport fuseParallelGraph(const std::shared_ptr<Graph>& graph) {
  ParallelFusionReport report;
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
      const bool shared = std::all_of(plan.kinds.begin(), plan.kinds.end(),
                                      [](ValueKind k) { return k == ValueKind::Uniform; });
      report.fused.push_back({{}, fmt::format("prim::If #{} (fused, guarded)", report.fused.size()), shared});
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
