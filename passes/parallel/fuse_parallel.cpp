#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/ir/alias_analysis.h>

#include <map>
#include <set>
#include <sstream>

#include "hfta/hfta.h"
#include "hfta/parallel.h"
#include "io/tensor_slots.h"
#include "passes/ir/inline_calls.h"
#include "passes/parallel/members.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

using torch::jit::Graph;
using torch::jit::Module;
using torch::jit::Node;
using torch::jit::Value;

// A call `submodule.forward(input)` in the top block of the parent's forward.
struct Call {
  Node* node;
  std::string path;  // e.g. members.0
  Module module;
};

// The submodule a chain of prim::GetAttr from the graph's `self` reaches,
// and its path, or nothing if `value` is not such a chain.
std::optional<std::pair<std::string, Module>> submoduleOf(const Module& root, Graph& graph, Value* value) {
  const auto names = parallel::pathFrom(graph.inputs()[0], value);
  if (!names || names->empty()) return std::nullopt;
  Module current = root;
  for (const auto& name : *names) {
    const auto attr = current.attr(name);
    if (!attr.isModule()) return std::nullopt;
    current = attr.toModule();
  }
  return std::make_pair(fmt::format("{}", fmt::join(*names, ".")), current);
}

// Moves the computation of `value` (if it comes after `first`) to just
// before `first`, producers first; false if that would change what it
// computes: a producer with side effects or a mutable schema, or one whose
// inputs a node in between writes (the members' calls excepted: whyNot
// made sure they write to no input).
bool hoistBefore(Value* value, Node* first, const std::set<Node*>& calls, torch::jit::AliasDb& alias_db) {
  Node* node = value->node();
  if (node->owningBlock() != first->owningBlock() || !node->isAfter(first)) return true;
  if (calls.count(node) || node->hasSideEffects() || !node->blocks().empty()) return false;
  if (node->kind() != torch::jit::prim::Constant && (node->maybeSchema() == nullptr || node->schema().is_mutable())) {
    return false;
  }
  for (Node* between = first; between != node; between = between->next()) {
    if (!calls.count(between) && alias_db.writesToAlias(between, {node->inputs().begin(), node->inputs().end()})) {
      return false;
    }
  }
  for (Value* input : node->inputs()) {
    if (!hoistBefore(input, first, calls, alias_db)) return false;
  }
  node->moveBefore(first);
  return true;
}

// Why `calls` cannot run as one fused call, or "" if they can.
std::string whyNot(Graph& graph, const std::vector<Call>& calls) {
  if (calls.size() > parallel::kMaxMembers) return fmt::format("more than {} members", parallel::kMaxMembers);
  // parameter -> the member that holds it, and its name there
  std::map<const c10::TensorImpl*, std::pair<const Call*, std::string>> owners;
  for (const auto& call : calls) {
    if (call.node->inputs().size() != 2 || !call.node->input(1)->type()->cast<c10::TensorType>() ||
        call.node->outputs().size() != 1 || !call.node->output()->type()->cast<c10::TensorType>()) {
      return fmt::format("{}.forward does not take one tensor and return one tensor", call.path);
    }
    for (const auto& p : call.module.named_parameters()) {
      const auto [it, fresh] = owners.emplace(p.value.unsafeGetTensorImpl(), std::make_pair(&call, p.name));
      // One member's weight under two names (tied) is one stacked weight;
      // a weight of two members would have to be one for both.
      if (!fresh && it->second.first != &call) {
        return fmt::format("{}.{} and {}.{} are one tensor: the members share a parameter", call.path, p.name,
                           it->second.first->path, it->second.second);
      }
    }
  }
  // The members are the modules the calls run on: a call that reads what
  // another computes depends on both.
  std::vector<parallel::GroupMember> members;
  for (const auto& call : calls) members.push_back({{call.node->input(0)}, call.path});
  const auto deps = parallel::dependence(graph, members);
  for (size_t b = 0; b < calls.size(); ++b) {
    for (size_t a = 0; a < calls.size(); ++a) {
      if (a != b && (deps.at(calls[b].node) >> a & 1)) return parallel::dataDependence(calls[b].path, calls[a].path);
    }
  }
  // A member that writes to its input would change what another reads (a
  // shared input, or a view of one tensor), and what it reads itself when
  // the fused call reads every input first.
  for (const auto& call : calls) {
    auto member_graph = call.module.get_method("forward").graph()->copy();
    inlineAllCalls(*member_graph);
    if (auto why = parallel::whyWritesItsInput(member_graph->block(), {member_graph->inputs()[1]}, call.path)) {
      return *why;
    }
  }
  return "";
}

// Sets `module`'s tensor at the dotted `name` (e.g. fc1.weight).
void setTensor(Module module, const std::string& name, const at::Tensor& value) {
  const auto dot = name.rfind('.');
  if (dot != std::string::npos) {
    std::stringstream path(name.substr(0, dot));
    std::string part;
    while (std::getline(path, part, '.')) module = module.attr(part).toModule();
  }
  module.setattr(name.substr(dot == std::string::npos ? 0 : dot + 1), value);
}

// Member b's parameters and buffers become views of slice b of the fused
// module's stacked tensors, detached: they follow training (and a saved
// module's members hold the trained values), while the trainable
// parameters are the stacked ones alone. A tied weight stays one view.
void mirrorMembers(const std::vector<Call>& calls, const Module& fused) {
  std::map<std::string, at::Tensor> stacked;
  for (const auto& p : fused.named_parameters()) stacked[p.name] = p.value;
  for (const auto& b : fused.named_buffers()) stacked[b.name] = b.value;
  for (size_t b = 0; b < calls.size(); ++b) {
    std::vector<std::string> names;
    for (const auto& p : calls[b].module.named_parameters()) names.push_back(p.name);
    for (const auto& buf : calls[b].module.named_buffers()) names.push_back(buf.name);
    std::map<std::string, at::Tensor> own;
    for (auto& slot : tensorSlots(calls[b].module)) own[slot.name] = std::move(slot.tensor);
    std::map<const c10::TensorImpl*, at::Tensor> views;  // the member's own tensor -> its slice of the stacked one
    for (const auto& name : names) {
      auto [it, fresh] = views.emplace(own.at(name).unsafeGetTensorImpl(), at::Tensor());
      if (fresh) it->second = stacked.at(name).detach().select(0, static_cast<int64_t>(b));
      setTensor(calls[b].module, name, it->second);
    }
    // Lists of its parameters (nn.LSTM's _flat_weights) hold the slices too.
    for (const auto& sub : calls[b].module.modules()) {
      for (size_t slot = 0; slot < sub.type()->numAttributes(); ++slot) {
        const auto value = sub._ivalue()->getSlot(slot);
        if (!value.isTensorList()) continue;
        auto list = value.toTensorList();
        for (size_t e = 0; e < list.size(); ++e) {
          const auto it = views.find(list.get(e).unsafeGetTensorImpl());
          if (it != views.end()) list.set(e, it->second);
        }
      }
    }
  }
}

}  // namespace

std::string ParallelFusionReport::text() const {
  std::string out = fmt::format("parallel fusion: {} group(s) fused, {} left\n", fused.size(), left.size());
  for (const auto& g : fused) {
    out +=
        fmt::format("  {} <- {} ({} input)\n", g.fused, fmt::join(g.members, ", "), g.shared_input ? "shared" : "own");
  }
  for (const auto& why : left) out += fmt::format("  why not: {}\n", why);
  return out;
}

ParallelFusionReport fuseParallel(Module& module) {
  ParallelFusionReport report;
  auto method = module.get_method("forward");
  auto graph = method.graph();
  // Candidates: calls of forward on submodules, grouped by the submodule's
  // class (TorchScript may give members of one class distinct types: the
  // engine's lockstep check then says whether they match).
  std::map<std::string, std::vector<Call>> by_type;
  std::vector<std::string> order;
  for (Node* node : graph->nodes()) {
    if (node->kind() != torch::jit::prim::CallMethod || node->s(torch::jit::attr::name) != "forward") continue;
    auto sub = submoduleOf(module, *graph, node->input(0));
    if (!sub) continue;
    const std::string class_name = demangledTypeName(sub->second.type());
    auto& group = by_type[class_name];
    if (group.empty()) order.push_back(class_name);
    group.push_back({node, sub->first, sub->second});
  }
  for (const auto& type : order) {
    const auto& calls = by_type[type];
    if (calls.size() < 2) continue;
    std::vector<std::string> paths;
    for (const auto& c : calls) paths.push_back(c.path);
    const auto why = whyNot(*graph, calls);
    if (!why.empty()) {
      report.left.push_back(fmt::format("{}: {}", fmt::join(paths, ", "), why));
      continue;
    }
    const bool shared = std::all_of(calls.begin(), calls.end(),
                                    [&](const Call& c) { return c.node->input(1) == calls[0].node->input(1); });
    std::vector<Member> members;
    for (const auto& c : calls) members.push_back({c.module, c.path});
    FuseOptions options;
    options.shared_input = shared;
    FusionResult fused;
    try {
      fused = fuse(members, options);
    } catch (const UserError& e) {
      report.left.push_back(fmt::format("{}: {}", fmt::join(paths, ", "), e.what()));
      continue;
    }
    // The fused call goes where the first member's call was; the later
    // members' inputs are computed before it (they depend on no member).
    Node* first = calls[0].node;
    torch::jit::AliasDb alias_db(graph);
    std::set<Node*> call_nodes;
    for (const auto& c : calls) call_nodes.insert(c.node);
    bool movable = true;
    for (const auto& c : calls) movable = movable && hoistBefore(c.node->input(1), first, call_nodes, alias_db);
    if (!movable) {
      report.left.push_back(fmt::format("{}: a member's input cannot be computed before the first member's call",
                                        fmt::join(paths, ", ")));
      continue;
    }
    const std::string name = fmt::format("hfta_parallel_{}", report.fused.size());
    module.register_module(name, fused.module);
    torch::jit::WithInsertPoint insert(first);
    Value* fused_self = graph->insertGetAttr(graph->inputs()[0], name);
    Value* input = calls[0].node->input(1);
    if (!shared) {
      std::vector<Value*> inputs;
      for (const auto& c : calls) inputs.push_back(c.node->input(1));
      Value* list = graph->insertNode(graph->createList(c10::TensorType::get(), inputs))->output();
      input = graph->insert(torch::jit::aten::stack, {list, 0});
    }
    Node* call = graph->insertNode(graph->create(torch::jit::prim::CallMethod, {fused_self, input}));
    call->s_(torch::jit::attr::name, "forward");
    call->output()->setType(c10::TensorType::get());
    call->copyMetadata(first);
    Value* slices = graph->insert(torch::jit::aten::unbind, {call->output(), 0});
    Node* unpack = graph->insertNode(graph->createListUnpack(slices, calls.size()));
    for (size_t b = 0; b < calls.size(); ++b) {
      calls[b].node->output()->replaceAllUsesWith(unpack->output(b));
      calls[b].node->destroy();
    }
    mirrorMembers(calls, fused.module);
    report.fused.push_back({paths, name, shared});
  }
  return report;
}

}  // namespace hfta
