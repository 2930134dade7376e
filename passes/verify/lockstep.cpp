#include "passes/verify/lockstep.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <unordered_map>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "passes/ir/diagnostics.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// aten::warn's id is a per-compilation counter, not part of the program.
const c10::Symbol kWarnId = c10::Symbol::attr("warn_id");

constexpr const char* kSameCodeHint =
    "Models fused together must come from the same code and configuration; "
    "fuse only members of one sweep";

std::string ivalueText(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return fmt::format("a {} tensor of shape [{}]", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ", "));
  }
  if (v.isDouble()) {
    // Python's spelling: 0.1, 2.0 (not 0.10000000000000001, 2).
    std::string text = fmt::format("{}", v.toDouble());
    if (text.find_first_of(".eni") == std::string::npos) text += ".0";
    return text;
  }
  return fmt::format("{}", fmt::streamed(v));
}

bool ivaluesEqual(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() != b.isTensor()) return false;
  if (a.isTensor()) {
    const auto &x = a.toTensor(), &y = b.toTensor();
    return x.scalar_type() == y.scalar_type() && x.sizes() == y.sizes() && at::equal(x, y);
  }
  return a == b;
}

bool isConstant(const Value* v) { return v->node()->kind() == c10::prim::Constant; }

// Constants are compared where they are used, by value: where the compiler
// placed them does not matter, and the message can name what they steer.
std::optional<std::string> constantDifference(const Value* tmpl, const Value* member) {
  if (!isConstant(member)) return "a constant in one and a computed value in the other";
  const auto tv = torch::jit::toIValue(tmpl);
  const auto mv = torch::jit::toIValue(member);
  if (tv.has_value() != mv.has_value() || (tv && !ivaluesEqual(*tv, *mv))) {
    return fmt::format("{} in one and {} in the other", tv ? ivalueText(*tv) : "None", mv ? ivalueText(*mv) : "None");
  }
  return std::nullopt;
}

// A node attribute (not a constant's value) as text, for comparison.
std::string attributeText(const Node* n, torch::jit::Symbol name) {
  using torch::jit::AttributeKind;
  switch (n->kindOf(name)) {
    case AttributeKind::i:
      return std::to_string(n->i(name));
    case AttributeKind::f:
      return fmt::format("{}", n->f(name));
    case AttributeKind::s:
      return n->s(name);
    case AttributeKind::is:
      return fmt::format("{}", n->is(name));
    case AttributeKind::fs:
      return fmt::format("{}", n->fs(name));
    case AttributeKind::ss:
      return fmt::format("{}", n->ss(name));
    case AttributeKind::ty:
      return demangledTypeName(n->ty(name));
    case AttributeKind::ival:
      return ivalueText(n->ival(name));
    case AttributeKind::t:
      return ivalueText(n->t(name));
    default:
      return fmt::format("<attribute of kind {}>", toString(n->kindOf(name)));
  }
}

class GraphLockstep {
 public:
  explicit GraphLockstep(const std::vector<MemberGraph>& members) : members_(members), to_template_(members.size()) {}

  void run() {
    for (size_t b = 1; b < members_.size(); ++b) {
      verifyBlock(b, members_[0].graph->block(), members_[b].graph->block());
    }
  }

 private:
  // A list or tuple built for an op (conv2d's stride) is named by that op.
  static std::string consumer(const Node* n) {
    if (n == nullptr || (n->kind() != c10::prim::ListConstruct && n->kind() != c10::prim::TupleConstruct) ||
        n->output()->uses().empty()) {
      return "";
    }
    const auto& use = n->output()->uses()[0];
    return fmt::format(" (in the list passed as argument {} of `{}`)", use.offset, use.user->kind().toQualString());
  }

  [[noreturn]] void mismatch(size_t b, const Node* t, const Node* m, const std::string& what) {
    throw UserError(fmt::format("{} does not match {}: {}{}. {} has {}; {} has {}. {}.", members_[b].name,
                                members_[0].name, what, consumer(t), members_[0].name,
                                t ? describeNode(t) : "no further node", members_[b].name,
                                m ? describeNode(m) : "no further node", kSameCodeHint));
  }

  void mapValues(size_t b, at::ArrayRef<const Value*> tmpl, at::ArrayRef<const Value*> member) {
    for (size_t i = 0; i < tmpl.size(); ++i) to_template_[b][member[i]] = tmpl[i];
  }

  bool sameSource(size_t b, const Value* tmpl, const Value* member) {
    if (isConstant(tmpl)) return !constantDifference(tmpl, member);
    auto it = to_template_[b].find(member);
    return it != to_template_[b].end() && it->second == tmpl;
  }

  static auto withoutConstants(const Block* block) {
    std::vector<const Node*> nodes;
    for (const Node* n : block->nodes()) {
      if (n->kind() != c10::prim::Constant) nodes.push_back(n);
    }
    return nodes;
  }

  void verifyBlock(size_t b, const Block* tmpl, const Block* member) {
    if (tmpl->inputs().size() != member->inputs().size()) {
      mismatch(b, tmpl->owningNode(), member->owningNode(),
               fmt::format("a block takes {} inputs in one and {} in the other", tmpl->inputs().size(),
                           member->inputs().size()));
    }
    if (tmpl->owningNode() == nullptr) {  // the graph's own inputs
      for (size_t i = 0; i < tmpl->inputs().size(); ++i) {
        const auto t = demangledTypeName(tmpl->inputs()[i]->type());
        const auto m = demangledTypeName(member->inputs()[i]->type());
        if (t != m) {
          throw UserError(fmt::format("{} does not match {}: input {} of forward is {} in one and {} in the other. {}.",
                                      members_[b].name, members_[0].name, i, t, m, kSameCodeHint));
        }
      }
    }
    mapValues(b, tmpl->inputs(), member->inputs());
    const auto tmpl_nodes = withoutConstants(tmpl);
    const auto member_nodes = withoutConstants(member);
    const size_t common = std::min(tmpl_nodes.size(), member_nodes.size());
    for (size_t i = 0; i < common; ++i) verifyNode(b, tmpl_nodes[i], member_nodes[i]);
    if (tmpl_nodes.size() != member_nodes.size()) {
      mismatch(b, common < tmpl_nodes.size() ? tmpl_nodes[common] : nullptr,
               common < member_nodes.size() ? member_nodes[common] : nullptr,
               "one graph has more operations than the other");
    }
    for (size_t i = 0; i < tmpl->outputs().size(); ++i) {
      if (i >= member->outputs().size() || !sameSource(b, tmpl->outputs()[i], member->outputs()[i])) {
        mismatch(b, tmpl->return_node(), member->return_node(), "they return different values");
      }
    }
  }

  void verifyNode(size_t b, const Node* t, const Node* m) {
    if (t->kind() != m->kind()) mismatch(b, t, m, "the operations differ");
    const auto* ts = t->maybeSchema();
    const auto* ms = m->maybeSchema();
    if ((ts == nullptr) != (ms == nullptr) || (ts && toString(*ts) != toString(*ms))) {
      mismatch(b, t, m, "the operator overloads differ");
    }
    if (t->inputs().size() != m->inputs().size()) {
      mismatch(b, t, m, "the operations take different numbers of inputs");
    }
    for (size_t i = 0; i < t->inputs().size(); ++i) {
      if (isConstant(t->input(i))) {
        if (auto difference = constantDifference(t->input(i), m->input(i))) {
          mismatch(b, t, m, fmt::format("argument {} is {}", i, *difference));
        }
      } else if (!sameSource(b, t->input(i), m->input(i))) {
        mismatch(b, t, m, fmt::format("input {} of the operation comes from a different place", i));
      }
    }
    if (t->attributeNames().size() != m->attributeNames().size()) {
      mismatch(b, t, m, "the operations have different attributes");
    }
    for (auto name : t->attributeNames()) {
      if (name == kWarnId) continue;
      if (!m->hasAttribute(name) || attributeText(t, name) != attributeText(m, name)) {
        mismatch(b, t, m,
                 fmt::format("attribute `{}` is {} in one and {} in the other", name.toUnqualString(),
                             attributeText(t, name), m->hasAttribute(name) ? attributeText(m, name) : "missing"));
      }
    }
    if (t->outputs().size() != m->outputs().size()) {
      mismatch(b, t, m, "the operations have different numbers of results");
    }
    for (size_t i = 0; i < t->outputs().size(); ++i) {
      // Submodule classes may differ by name as long as what they do (the
      // inlined nodes compared next) is the same.
      if (auto cls = t->output(i)->type()->cast<c10::ClassType>(); cls && cls->is_module()) continue;
      const auto tt = demangledTypeName(t->output(i)->type());
      const auto mt = demangledTypeName(m->output(i)->type());
      if (tt != mt) {
        mismatch(b, t, m, fmt::format("result {} has type {} in one and {} in the other", i, tt, mt));
      }
    }
    if (t->blocks().size() != m->blocks().size()) {
      mismatch(b, t, m, "the operations have different numbers of blocks");
    }
    for (size_t i = 0; i < t->blocks().size(); ++i) verifyBlock(b, t->blocks()[i], m->blocks()[i]);
    mapValues(b, t->outputs(), m->outputs());
  }

  const std::vector<MemberGraph>& members_;
  // Per member: its value -> the template's (member 0's) value.
  std::vector<std::unordered_map<const Value*, const Value*>> to_template_;
};

void verifyModulePair(const torch::jit::Module& tmpl, const torch::jit::Module& member, const std::string& prefix,
                      const std::string& tmpl_name, const std::string& member_name) {
  const auto tmpl_type = tmpl.type();
  const auto member_type = member.type();
  auto fail = [&](const std::string& what, const std::string& fix) {
    throw UserError(fmt::format("{} does not match {}: {}. {}.", member_name, tmpl_name, what, fix));
  };
  if (tmpl_type->numAttributes() != member_type->numAttributes()) {
    fail(fmt::format("module `{}` has {} attributes in one and {} in the other", prefix.empty() ? "<root>" : prefix,
                     tmpl_type->numAttributes(), member_type->numAttributes()),
         kSameCodeHint);
  }
  for (size_t i = 0; i < tmpl_type->numAttributes(); ++i) {
    const auto name = tmpl_type->getAttributeName(i);
    const auto qualified = prefix.empty() ? name : prefix + "." + name;
    const auto slot = member_type->findAttributeSlot(name);
    if (!slot) fail(fmt::format("`{}` is missing", qualified), kSameCodeHint);
    if (tmpl_type->is_parameter(i) != member_type->is_parameter(*slot) ||
        tmpl_type->is_buffer(i) != member_type->is_buffer(*slot)) {
      fail(fmt::format("`{}` is a parameter or buffer in one and not in the other", qualified), kSameCodeHint);
    }
    const auto tv = tmpl._ivalue()->getSlot(i);
    const auto mv = member._ivalue()->getSlot(*slot);
    if (tv.isModule() && mv.isModule()) {
      verifyModulePair(tv.toModule(), mv.toModule(), qualified, tmpl_name, member_name);
    } else if (tv.isTensor() && mv.isTensor()) {
      const auto &x = tv.toTensor(), &y = mv.toTensor();
      if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) {
        fail(fmt::format("`{}` is {} in one and {} in the other", qualified, ivalueText(tv), ivalueText(mv)),
             "Fused members must have the same layer sizes and dtypes");
      }
    } else if (tv.isTensorList() && mv.isTensorList()) {
      const auto x = tv.toTensorList(), y = mv.toTensorList();
      if (x.size() != y.size()) {
        fail(fmt::format("list `{}` holds {} tensors in one and {} in the other", qualified, x.size(), y.size()),
             kSameCodeHint);
      }
      for (size_t e = 0; e < x.size(); ++e) {
        const at::Tensor a = x.get(e), b = y.get(e);
        if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
          fail(fmt::format("`{}[{}]` is {} in one and {} in the other", qualified, e, ivalueText(a), ivalueText(b)),
               "Fused members must have the same layer sizes and dtypes");
        }
      }
    } else if (tv.isTensor() != mv.isTensor() || tv.isModule() != mv.isModule() || !(tv == mv)) {
      const std::string fix = name == "training"
                                  ? "Put every member in the same mode (all .train() or all .eval()) before saving"
                                  : "Non-tensor attributes steer the program and must be equal in every member";
      fail(fmt::format("attribute `{}` is {} in one and {} in the other", qualified, ivalueText(tv), ivalueText(mv)),
           fix);
    }
  }
}

// A tensor held under several names (a tied weight) is one tensor in the
// fused module: every member must tie the same names.
void verifyTiesMatch(const torch::jit::Module& tmpl, const torch::jit::Module& member, const std::string& tmpl_name,
                     const std::string& member_name) {
  const auto tmpl_ties = tiedSlots(tensorSlots(tmpl)), member_ties = tiedSlots(tensorSlots(member));
  auto tiedTo = [](const std::map<std::string, std::string>& ties, const std::string& name) {
    const auto it = ties.find(name);
    return it == ties.end() ? name : it->second;
  };
  for (const auto& slot : tensorSlots(tmpl)) {
    const auto in_tmpl = tiedTo(tmpl_ties, slot.name), in_member = tiedTo(member_ties, slot.name);
    if (in_tmpl == in_member) continue;
    // Name the pair that is one tensor in one model and two in the other.
    const bool tied_in_tmpl = in_tmpl != slot.name;
    const auto& other = tied_in_tmpl ? in_tmpl : in_member;
    throw UserError(fmt::format(
        "{} does not match {}: `{}` and `{}` are one tensor (tied) in {} and two tensors in {}. Tie the same "
        "weights in every member (e.g. head.weight = embedding.weight in each) before scripting them.",
        member_name, tmpl_name, other, slot.name, tied_in_tmpl ? tmpl_name : member_name,
        tied_in_tmpl ? member_name : tmpl_name));
  }
}

}  // namespace

void verifyGraphsInLockstep(const std::vector<MemberGraph>& members) { GraphLockstep(members).run(); }

void verifyModulesInLockstep(const std::vector<torch::jit::Module>& modules, const std::vector<std::string>& names) {
  for (size_t b = 1; b < modules.size(); ++b) {
    verifyModulePair(modules[0], modules[b], "", names[0], names[b]);
    verifyTiesMatch(modules[0], modules[b], names[0], names[b]);
  }
}

}  // namespace hfta
