#pragma once
// The analysis both ensemble passes share (hfta::fuseParallel on a module's
// calls of its members, hfta::fuseParallelGraph on the inlined graph): the
// members of a parallel group (sibling submodules, reached from the graph's
// self), what each node depends on, why members cannot run side by side,
// and (for the graph pass) each member's region of nodes.
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace hfta::parallel {

// Which members of a group a node depends on, one bit per member.
using MemberSet = uint64_t;
inline constexpr size_t kMaxMembers = 63;
// Marks a node that depends on a member's write to what the member did not
// compute: it belongs to no member.
inline constexpr MemberSet kForeignWrite = MemberSet{1} << 63;

struct GroupMember {
  // A submodule, reached from the graph's self by prim::GetAttr (by several
  // chains where the graph reads it more than once; the first defined first).
  std::vector<torch::jit::Value*> modules;
  std::string path;  // e.g. members.0
  std::vector<torch::jit::Node*> region;
  // The region as a graph of its own (input 0: the member), what it reads
  // from the rest of the graph (inputs 1...) and what the rest reads of it.
  std::shared_ptr<torch::jit::Graph> tmpl;
  std::vector<torch::jit::Value*> inputs;
  std::vector<torch::jit::Value*> outputs;
};

using Dependence = std::unordered_map<const torch::jit::Node*, MemberSet>;

// The attribute names from `root` (the graph's self) to `value`, or nothing
// if `value` is not reached that way.
std::optional<std::vector<std::string>> pathFrom(torch::jit::Value* root, torch::jit::Value* value);

// The node of the top block `top` that holds `node`.
torch::jit::Node* topLevel(torch::jit::Node* node, const torch::jit::Block* top);

// For each node of the top block: the members it depends on.
Dependence dependence(torch::jit::Graph& graph, const std::vector<GroupMember>& members);

// Why the members cannot run side by side (a node reads one member's
// attributes and depends on another), or nothing.
std::optional<std::string> whyDependent(torch::jit::Graph& graph, const std::vector<GroupMember>& members,
                                        const Dependence& deps);

// Fills each member's region: the nodes that depend on it alone, less the
// rest of the graph's (a container the members' outputs go into, the
// caller's steps at a region's end); returns all the regions' nodes.
std::set<const torch::jit::Node*> findRegions(torch::jit::Graph& graph, std::vector<GroupMember>& members,
                                              const Dependence& deps);

// Copies `member.region` into a graph of its own and records what it reads
// and what is read of it.
void extract(torch::jit::Graph& graph, GroupMember& member, const std::set<const torch::jit::Node*>& all_regions);

// Sibling submodules of one type, in the order the graph first reads them.
// Siblings of one class but several types, which run side by side, go to
// `mixed` as a line saying why they are not fused.
std::vector<std::vector<GroupMember>> findGroups(torch::jit::Graph& graph, std::vector<std::string>& mixed);

std::string joinPaths(const std::vector<GroupMember>& members);

// Why `reader` cannot run beside `writer`: it reads what `writer` computes.
std::string dataDependence(const std::string& reader, const std::string& writer);

// Why a member cannot run beside the others because its code (`code`, one
// member's) writes in place to one of its `inputs` or a view of one, which
// other members may read; nothing if it does not.
std::optional<std::string> whyWritesItsInput(const torch::jit::Block* code, std::set<const torch::jit::Value*> inputs,
                                             const std::string& path);

}  // namespace hfta::parallel
