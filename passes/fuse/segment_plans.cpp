#include "passes/fuse/segment_plans.h"

#include <fmt/format.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/fuse/fallback.h"
#include "passes/ir/diagnostics.h"
#include "passes/ir/walk.h"
#include "passes/ir/writes.h"
#include "runtime/ops/op_kinds.h"
#include "support/stable_hash.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using torch::jit::WithInsertPoint;

// Every segment past the first costs one more trial of the race at first
// use (segment_plan.h) and a stack at its exit when it runs per member:
// four let a network's early layers and late layers differ.
constexpr size_t kMaxSegments = 4;

using Segment = std::vector<Node*>;

// Nodes that only name a value (constants, module attributes) run before a
// segment's plans, where both plans see them.
bool namesAValue(const Node* node) { return node->kind() == c10::prim::Constant || node->kind() == c10::prim::GetAttr; }

// A value that carries per-sample data on: a tensor, not a parameter,
// buffer, constant or module.
bool carriesData(const Value* v) {
  return containsTensor(v->type()) && v->type()->kind() != c10::TypeKind::ClassType && !namesAValue(v->node());
}

// Whether the node draws random numbers: a nondeterministic op (dropout
// with a constant train=False is not one already), unless its dropout
// probability is a constant 0, with which ATen returns the input (or
// attends, or recurs) without drawing (torchvision's ViT has such
// dropouts).
bool drawsRandomNumbers(const Node* node) {
  if (!node->isNondeterministic()) return false;
  const auto* schema = node->maybeSchema();
  for (const char* name : {"p", "dropout_p", "dropout"}) {
    const auto index = schema ? schema->argumentIndexWithName(name) : std::nullopt;
    if (!index) continue;
    const auto p = torch::jit::toIValue(node->input(*index));
    return !(p && p->isDouble() && p->toDouble() == 0.0);
  }
  return true;
}

bool doesWork(const Node* node) {
  if (namesAValue(node)) return false;
  return std::any_of(node->outputs().begin(), node->outputs().end(),
                     [](const Value* v) { return containsTensor(v->type()); });
}

// Whether `node` is the block's return or packs values for it alone (the
// tuple of a forward that returns several values).
bool onlyReturns(const Node* node, const Block* block) {
  if (node == block->return_node()) return true;
  const auto kind = node->kind();
  if (kind != c10::prim::TupleConstruct && kind != c10::prim::ListConstruct) return false;
  return std::all_of(node->outputs().begin(), node->outputs().end(), [&](const Value* out) {
    return std::all_of(out->uses().begin(), out->uses().end(),
                       [&](const torch::jit::Use& use) { return onlyReturns(use.user, block); });
  });
}

// Cuts `block` where one tensor carries the data on, into at most
// kMaxSegments segments of about equal work. A value the block only returns
// does not count: it is stacked once, at the exit of the segment that makes
// it, wherever the later cuts fall (PointNet's transforms, returned for the
// loss's regularizer, would otherwise leave no cut after the first).
std::vector<Segment> cutIntoSegments(Block* block) {
  const std::vector<Node*> nodes(block->nodes().begin(), block->nodes().end());
  const size_t n = nodes.size();
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < n; ++i) position[nodes[i]] = i;
  // live[p]: data values defined before node p and read by node p or a
  // later node.
  std::vector<int> live(n + 1, 0);
  auto count = [&](const Value* v, size_t first_cut) {
    if (!carriesData(v)) return;
    std::optional<size_t> last;
    for (const auto& use : v->uses()) {
      if (onlyReturns(use.user, block)) continue;
      last = std::max(last.value_or(0), position.at(enclosingNodeIn(use.user, block)));
    }
    for (size_t p = first_cut; last && p <= *last; ++p) ++live[p];
  };
  for (const Value* input : block->inputs()) count(input, 0);
  std::vector<size_t> work(n + 1, 0);  // work[p]: nodes before p that do work
  for (size_t i = 0; i < n; ++i) {
    for (const Value* out : nodes[i]->outputs()) count(out, i + 1);
    work[i + 1] = work[i] + doesWork(nodes[i]);
  }
  const size_t segments = std::clamp<size_t>(work[n], 1, kMaxSegments);
  std::vector<size_t> cuts{0};
  for (size_t j = 1; j < segments; ++j) {
    const double target = static_cast<double>(work[n]) * j / segments;
    std::optional<size_t> best;
    for (size_t p = cuts.back() + 1; p < n; ++p) {
      if (live[p] > 1 || work[p] == work[cuts.back()] || work[p] == work[n]) continue;
      if (!best || std::abs(work[p] - target) < std::abs(work[*best] - target)) best = p;
    }
    if (best) cuts.push_back(*best);
  }
  cuts.push_back(n);
  std::vector<Segment> out;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) out.emplace_back(nodes.begin() + cuts[s], nodes.begin() + cuts[s + 1]);
  return out;
}

// The segment's nodes (`body`, top-level) and what crosses its edges.
struct Edges {
  std::vector<Value*> inputs;   // read inside, defined before
  std::vector<Value*> outputs;  // defined inside, read after
  // Inputs that carry data and that the segment writes in place: each
  // member writes a copy of its slice (views of one tensor share a version
  // counter, and autograd would see member 1's write as a change of what
  // member 0 saved).
  std::unordered_set<const Value*> written;
};

Edges edgesOf(const Segment& body) {
  const Block* block = body.front()->owningBlock();
  const std::unordered_set<const Node*> inside(body.begin(), body.end());
  auto defined_inside = [&](const Value* v) { return inside.count(enclosingNodeIn(v->node(), block)) > 0; };
  Edges edges;
  std::unordered_set<Value*> seen;
  for (Node* node : body) {
    // What the node and the nodes of its blocks read, their blocks'
    // outputs included, at any depth.
    auto add_inputs = [&](Node* n) {
      auto add = [&](Node* reader) {
        for (Value* v : reader->inputs()) {
          if (!defined_inside(v) && seen.insert(v).second) edges.inputs.push_back(v);
        }
      };
      add(n);
      for (Block* inner : n->blocks()) add(inner->return_node());
    };
    add_inputs(node);
    for (Block* inner : node->blocks()) forEachNode(inner, add_inputs);
    for (Value* out : node->outputs()) {
      const bool read_after = std::any_of(out->uses().begin(), out->uses().end(), [&](const torch::jit::Use& use) {
        return use.user == block->return_node() || !inside.count(enclosingNodeIn(use.user, block));
      });
      if (read_after) edges.outputs.push_back(out);
    }
  }
  const std::unordered_set<const Value*> inputs(edges.inputs.begin(), edges.inputs.end());
  auto note_writes = [&](const Node* node) {
    for (size_t i : writtenInputs(node)) {
      const Value* target = node->input(i);
      if (inputs.count(target) && carriesData(target)) edges.written.insert(target);
    }
  };
  for (Node* node : body) {
    note_writes(node);
    for (Block* inner : node->blocks()) forEachNode(inner, note_writes);
  }
  return edges;
}

// Why the members' own ops cannot stand in for the segment, or nullopt.
std::optional<std::string> whyFusedOnly(const GraphFuser& fuser, const Segment& body, const Edges& edges) {
  const std::unordered_set<Value*> before(edges.inputs.begin(), edges.inputs.end());
  std::optional<std::string> why;
  for (Node* top : body) {
    auto check = [&](const Node* node) {
      if (why) return;
      if (node->kind() == c10::prim::SetAttr) {
        why = fmt::format("{} sets a module attribute", describeNode(node));
        return;
      }
      if (drawsRandomNumbers(node)) {
        // The members would draw other numbers than the fused op draws for
        // them (one [B, ...] draw against B draws): a run would then depend
        // on which plan its steps took, and a seed would not reproduce it.
        why = fmt::format("{} draws random numbers", describeNode(node));
        return;
      }
      for (const Value* v : node->inputs()) {
        if (fuser.isRagged(v)) {
          why = fmt::format("{} reads tensors whose sizes differ between members", describeNode(node));
          return;
        }
      }
      for (size_t i : writtenInputs(node)) {
        Value* target = node->input(i);
        if (!before.count(target)) continue;
        // A member's write reaches its slice of a per-member tensor (a view
        // of it); into a shared value or a list, B writes would collide.
        const auto kind = fuser.lookup(target).kind;
        if (!isPerMemberTensor(kind) || target->type()->kind() != c10::TypeKind::TensorType) {
          why = fmt::format("{} writes into `{}`, which is not one tensor per member", describeNode(node),
                            target->debugName());
          return;
        }
      }
    };
    check(top);
    for (Block* inner : top->blocks()) forEachNode(inner, check);
  }
  const Block* block = body.front()->owningBlock();
  const std::unordered_set<const Node*> inside(body.begin(), body.end());
  for (const Value* v : edges.written) {
    if (why) break;
    // The members write copies: nothing after the segment may read the
    // original, which the fused plan writes.
    const bool read_after = std::any_of(v->uses().begin(), v->uses().end(), [&](const torch::jit::Use& use) {
      const Node* user = enclosingNodeIn(use.user, block);
      return use.user == block->return_node() || (!inside.count(user) && user->isAfter(body.back()));
    });
    if (v->node()->kind() == c10::prim::Param || read_after) {
      why = fmt::format("it writes `{}` in place, which {}", v->debugName(),
                        read_after ? "is read after it" : "is an input of the model");
    }
  }
  return why;
}

// The members' own ops for the segment, one member after another on its
// slices, at the insertion point; each output in the fused plan's kind, or
// nullopt where the members' values cannot take it.
std::optional<std::vector<Value*>> emitMembers(GraphFuser& fuser, const Segment& body, const Edges& edges,
                                               const std::vector<FusedValue>& fused_outputs) {
  Graph& g = fuser.graph();
  const int64_t array_size = fuser.arraySize();
  // A tensor input is split once into its members' tensors: a stacked one
  // [B, *] unbound (whose backward stacks the B gradients once, where B
  // selects would each scatter into a zero tensor of all members), a
  // folded one [N, B*C, *] chunked into the members' [N, C, *]; each made
  // contiguous, so that a member's ops see the memory layout, and take
  // the kernels, they take alone.
  std::unordered_map<const Value*, std::vector<Value*>> pieces_of;
  auto slice_of = [&](Value* v, int64_t b) -> Value* {
    const FusedValue& fused = fuser.lookup(v);
    const bool tensor = fused.value->type()->kind() == c10::TypeKind::TensorType;
    if (!tensor || !isPerMemberTensor(fused.kind)) return fuser.memberValue(fused, b);
    auto& pieces = pieces_of[v];
    if (pieces.empty()) {
      const bool folded = fused.kind == ValueKind::Folded;
      Value* list = folded ? g.insert(c10::aten::chunk, {fused.value, array_size, 1})
                           : g.insert(c10::aten::unbind, {fused.value, 0});
      for (Value* piece : g.insertNode(g.createListUnpack(list, array_size))->outputs()) {
        pieces.push_back(g.insert(c10::aten::contiguous, {piece}));  // (free where it already is)
      }
    }
    return pieces[b];
  };
  // Every input is split at the segment's entry, before any member's
  // nodes: split where a member first reads it, inside a torch.no_grad()
  // region of the segment, a slice would carry no gradient to what follows.
  std::vector<std::unordered_map<const Value*, Value*>> envs(array_size);
  for (int64_t b = 0; b < array_size; ++b) {
    for (Value* v : edges.inputs) {
      Value* slice = slice_of(v, b);
      envs[b][v] = edges.written.count(v) ? g.insert(c10::aten::clone, {slice}) : slice;
    }
  }
  std::vector<std::vector<Value*>> members(edges.outputs.size());
  for (int64_t b = 0; b < array_size; ++b) {
    auto& env = envs[b];
    auto member_of = [&](Value* v) { return env.at(v); };
    for (Node* node : body) {
      Node* copy = g.insertNode(g.createClone(node, member_of));
      for (Block* inner : copy->blocks()) narrowAttributeReads(inner, b);
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        Value* out = copy->output(i);
        const bool stacked = node->kind() == c10::prim::GetAttr && isStackedAttribute(out->type());
        env[node->output(i)] = stacked ? fuser.memberValue({out, ValueKind::Array}, b) : out;
      }
    }
    for (size_t i = 0; i < edges.outputs.size(); ++i) members[i].push_back(env.at(edges.outputs[i]));
  }
  std::vector<Value*> outputs;
  for (size_t i = 0; i < edges.outputs.size(); ++i) {
    const auto& type = edges.outputs[i]->type();
    switch (fused_outputs[i].kind) {
      case ValueKind::Uniform:  // the same in every member
        outputs.push_back(members[i][0]);
        break;
      case ValueKind::Array: {
        const FusedValue stacked = fuser.stackMembers(members[i], type);
        if (stacked.kind != ValueKind::Array) return std::nullopt;
        outputs.push_back(stacked.value);
        break;
      }
      case ValueKind::Folded: {  // [N, C, *] each -> [N, B*C, *]
        Value* list = g.insertNode(g.createList(c10::TensorType::get(), members[i]))->output();
        outputs.push_back(g.insert(c10::aten::cat, {list, 1}));
        break;
      }
      case ValueKind::PerMember:
        outputs.push_back(g.insertNode(g.createList(type, members[i]))->output());
        break;
    }
  }
  return outputs;
}

// The user's source line of the segment's first (or last) node that has one.
std::string describeSource(const Segment& body, bool first) {
  auto has_source = [](const Node* node) { return !sourceLine(node).empty(); };
  if (first) {
    const auto it = std::find_if(body.begin(), body.end(), has_source);
    return it == body.end() ? "" : sourceLine(*it);
  }
  const auto it = std::find_if(body.rbegin(), body.rend(), has_source);
  return it == body.rend() ? "" : sourceLine(*it);
}

class SegmentFuser {
 public:
  SegmentFuser(GraphFuser& fuser, std::string graph) : fuser_(fuser), g_(fuser.graph()), graph_(std::move(graph)) {}

  void fuse(const Segment& segment) {
    FusionReport::Segment entry{describeSource(segment, true), describeSource(segment, false),
                                static_cast<int64_t>(segment.size()), "fused | members"};
    // What only names a value runs first, seen by both plans (a name read
    // by a node of the segment stays in order).
    Segment body;
    std::unordered_set<const Value*> defined_in_body;
    for (Node* node : segment) {
      const bool reads_body = std::any_of(node->inputs().begin(), node->inputs().end(),
                                          [&](const Value* v) { return defined_in_body.count(v) > 0; });
      if (namesAValue(node) && !reads_body) {
        fuser_.fuseNode(node);
        continue;
      }
      body.push_back(node);
      defined_in_body.insert(node->outputs().begin(), node->outputs().end());
    }
    if (std::none_of(body.begin(), body.end(), doesWork)) {
      for (Node* node : body) fuser_.fuseNode(node);
      return;
    }
    const Edges edges = edgesOf(body);
    if (auto why = whyFusedOnly(fuser_, body, edges)) {
      for (Node* node : body) fuser_.fuseNode(node);
      entry.plans = "fused: " + *why;
      fuser_.report().segments.push_back(entry);
      return;
    }
    if (!emitBothPlans(body, edges)) entry.plans = "fused: its values cannot be stacked from the members' own";
    fuser_.report().segments.push_back(entry);
  }

  // Numbers the plan ops now that their count is known.
  void finish() {
    for (size_t i = 0; i < plan_ops_.size(); ++i) {
      WithInsertPoint before(plan_ops_[i]);
      plan_ops_[i]->replaceInput(1, g_.insertConstant(static_cast<int64_t>(i)));
      plan_ops_[i]->replaceInput(2, g_.insertConstant(static_cast<int64_t>(plan_ops_.size())));
    }
  }

 private:
  bool emitBothPlans(const Segment& body, const Edges& edges) {
    // The first plan op chooses for the call (segment_plan.h): it reads the
    // module and its forward's inputs, which its race runs copies of.
    Value* self = g_.inputs().at(0);
    std::vector<Value*> inputs;
    if (plan_ops_.empty()) inputs.assign(g_.inputs().begin() + 1, g_.inputs().end());
    Value* list = g_.insertNode(g_.createList(c10::AnyType::get(), inputs))->output();
    Value* use_fused = g_.insert(kind::segment_plan(), {graph_, int64_t{0}, int64_t{0}, self, list});
    Node* choice = g_.insertNode(g_.create(c10::prim::If, {use_fused}, 0));
    Block* fused_block = choice->addBlock();
    Block* members_block = choice->addBlock();
    std::vector<FusedValue> fused_outputs;
    {
      WithInsertPoint in(fused_block);
      for (Node* node : body) fuser_.fuseNode(node);
      for (Value* out : edges.outputs) fused_outputs.push_back(fuser_.lookup(out));
    }
    const bool ragged = std::any_of(body.begin(), body.end(), [&](const Node* node) {
      return std::any_of(node->outputs().begin(), node->outputs().end(),
                         [&](const Value* v) { return fuser_.isRagged(v); });
    });
    std::optional<std::vector<Value*>> member_outputs;
    if (!ragged) {
      WithInsertPoint in(members_block);
      member_outputs = emitMembers(fuser_, body, edges, fused_outputs);
    }
    std::vector<c10::TypePtr> types;
    for (size_t i = 0; member_outputs && i < fused_outputs.size(); ++i) {
      auto type = c10::unifyTypes(fused_outputs[i].value->type(), (*member_outputs)[i]->type());
      if (!type) member_outputs.reset();
      types.push_back(type.value_or(nullptr));
    }
    if (!member_outputs) {  // the fused plan alone, in place of the choice
      for (auto it = fused_block->nodes().begin(); it != fused_block->nodes().end();) (*it++)->moveBefore(choice);
      fuser_.discard(choice);
      use_fused->node()->destroy();
      list->node()->destroy();
      return false;
    }
    for (size_t i = 0; i < fused_outputs.size(); ++i) {
      fused_block->registerOutput(fused_outputs[i].value);
      members_block->registerOutput((*member_outputs)[i]);
      fuser_.bind(edges.outputs[i], {choice->addOutput()->setType(types[i]), fused_outputs[i].kind});
    }
    plan_ops_.push_back(use_fused->node());
    return true;
  }

  GraphFuser& fuser_;
  Graph& g_;
  std::string graph_;
  std::vector<Node*> plan_ops_;
};

}  // namespace

std::vector<FusedValue> fuseInSegments(GraphFuser& fuser, Block* tmpl, const std::string& graph) {
  fuser.report().plan_graph = graph;
  SegmentFuser segments(fuser, graph);
  for (const Segment& segment : cutIntoSegments(tmpl)) segments.fuse(segment);
  segments.finish();
  std::vector<FusedValue> outputs;
  for (Value* v : tmpl->outputs()) outputs.push_back(fuser.lookup(v));
  return outputs;
}

std::string planGraphKey(const Graph& tmpl, int64_t array_size, const std::vector<ValueKind>& input_kinds) {
  std::string text = tmpl.toString(false) + fmt::format("|B={}|", array_size);
  for (const auto kind : input_kinds) text += std::to_string(static_cast<int>(kind));
  return fmt::format("{:016x}", StableHash().add(text).value());
}

}  // namespace hfta
