#include "passes/parallel/members.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "passes/ir/diagnostics.h"
#include "passes/ir/walk.h"
#include "passes/ir/writes.h"
#include "support/torch_types.h"

namespace hfta::parallel {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;

namespace {

// The values `node` reads, its blocks' nodes included.
std::vector<Value*> reads(Node* node) {
  std::vector<Value*> out(node->inputs().begin(), node->inputs().end());
  for (Block* block : node->blocks()) {
    forEachNode(block, [&](Node* inner) {
      out.insert(out.end(), inner->inputs().begin(), inner->inputs().end());
      for (Block* nested : inner->blocks()) out.insert(out.end(), nested->outputs().begin(), nested->outputs().end());
    });
    out.insert(out.end(), block->outputs().begin(), block->outputs().end());
  }
  return out;
}

// Whether `node` writes in place to a value whose producer does not depend
// on exactly the members in `own` (a graph input, another member's value).
bool writesOutside(Node* node, const Dependence& deps, MemberSet own) {
  for (size_t i : writtenInputs(node)) {
    auto producer = deps.find(node->input(i)->node());
    if (producer == deps.end() || producer->second != own) return true;
  }
  return false;
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

}  // namespace

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

Dependence dependence(Graph& graph, const std::vector<GroupMember>& members) {
  std::unordered_map<const Value*, MemberSet> roots;
  for (size_t b = 0; b < members.size(); ++b) {
    for (Value* module : members[b].modules) roots[module] = MemberSet{1} << b;
  }
  Dependence deps;
  for (Node* node : graph.nodes()) {
    MemberSet set = 0;
    for (Value* v : reads(node)) {
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
    for (size_t i : writtenInputs(node)) {
      if (auto p = deps.find(node->input(i)->node()); p != deps.end()) p->second |= set;
    }
  }
  return deps;
}

void extract(Graph& graph, GroupMember& member, const std::set<const Node*>& all_regions) {
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

std::string joinPaths(const std::vector<GroupMember>& members) {
  std::vector<std::string> paths;
  for (const auto& m : members) paths.push_back(m.path);
  return fmt::format("{}", fmt::join(paths, ", "));
}

std::optional<std::string> whyDependent(Graph& graph, const std::vector<GroupMember>& members, const Dependence& deps) {
  const size_t count = members.size();
  for (Node* node : graph.nodes()) {
    const MemberSet set = deps.at(node);
    if (__builtin_popcountll(set) < 2) continue;
    if (set & kForeignWrite && __builtin_popcountll(set) == 2 && writesOutside(node, deps, set & ~kForeignWrite)) {
      for (size_t b = 0; b < count; ++b) {
        if (set >> b & 1) {
          return fmt::format(
              "{} writes in place to what it did not compute ({}{}): the members must run in "
              "their order",
              members[b].path, node->kind().toQualString(), sourceLine(node).empty() ? "" : " at " + sourceLine(node));
        }
      }
    }
    const std::vector<Value*> values = reads(node);
    for (size_t b = 0; b < count; ++b) {
      const bool reads_member = std::any_of(values.begin(), values.end(), [&](Value* v) {
        const auto& modules = members[b].modules;
        return std::count(modules.begin(), modules.end(), v) ||
               (v->node()->kind() == prim::GetAttr && deps.count(v->node()) &&
                deps.at(v->node()) == (MemberSet{1} << b));
      });
      if (!reads_member) continue;
      for (size_t a = 0; a < count; ++a) {
        if (a != b && (set >> a & 1)) {
          return dataDependence(members[b].path, members[a].path);
        }
      }
    }
  }
  return std::nullopt;
}

std::set<const Node*> findRegions(Graph& graph, std::vector<GroupMember>& members, const Dependence& deps) {
  const size_t count = members.size();
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
      return std::any_of(out->uses().begin(), out->uses().end(),
                         [&](const torch::jit::Use& u) { return !region.count(topLevel(u.user, graph.block())); });
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
  return all_regions;
}

std::vector<std::vector<GroupMember>> findGroups(Graph& graph, std::vector<std::string>& mixed) {
  Value* self = graph.inputs()[0];
  std::map<std::pair<std::string, const c10::Type*>, size_t> index;            // (parent's path, type) -> group
  std::map<std::string, std::pair<size_t, size_t>> known;                      // path -> (group, member)
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> classes;  // (parent, class) -> groups
  std::vector<std::vector<GroupMember>> groups;
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
    std::vector<GroupMember> siblings;
    for (size_t i : indices) siblings.insert(siblings.end(), groups[i].begin(), groups[i].end());
    if (siblings.size() > kMaxMembers || whyDependent(graph, siblings, dependence(graph, siblings))) continue;
    mixed.push_back(
        fmt::format("{}: submodules of class {} of {} different TorchScript types (different "
                    "constants, such as layer sizes): only members of one type are fused",
                    joinPaths(siblings), key.second, indices.size()));
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.size() < 2; }), groups.end());
  return groups;
}

std::string dataDependence(const std::string& reader, const std::string& writer) {
  return fmt::format("{} reads what {} computes (a data dependence between members)", reader, writer);
}

std::optional<std::string> whyWritesItsInput(const Block* code, std::set<const Value*> inputs,
                                             const std::string& path) {
  if (!writesTo(code, inputs)) return std::nullopt;
  return fmt::format(
      "{} writes in place to its input (which other members may read): the members must run in "
      "their order",
      path);
}

}  // namespace hfta::parallel
