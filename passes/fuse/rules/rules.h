#pragma once
// The fusion rule table: one entry per operator schema (or, for prim nodes
// without a schema, per node kind), grouped by op family, one file each.
#include <vector>

#include "passes/fuse/rule_context.h"

namespace hfta {

using RuleFn = RuleResult (*)(RuleContext&);

// One rule, as a family's file lists it.
struct Rule {
  const char* key;  // a full schema, or a prim node kind ("prim::If")
  RuleFn fuse;
};

// A rule in the table, stamped with its family's label for the report
// ("linear", "control flow", ...: families.def).
struct RuleEntry {
  const char* key;
  const char* family;
  RuleFn fuse;
};

// The families (rules/<name>.cpp), as families.def lists them.
namespace rules {
#define HFTA_RULE_FAMILY(name, label) std::vector<Rule> name();
#include "passes/fuse/rules/families.def"
#undef HFTA_RULE_FAMILY
}  // namespace rules

// Shared building blocks (rules/elementwise.cpp): input 0 is the per-member
// tensor (a uniform one is broadcast to B members), every other input a
// uniform scalar; the op runs once on the [B, ...] array. The in-place form
// also requires input 0 to be per-member already.
RuleResult fusePerElement(RuleContext& ctx);
RuleResult fusePerElementInPlace(RuleContext& ctx);
// A binary op in place, self.op_(other, scalars...): self must be
// per-member; other is lined up with self's member dims (hfta::align).
RuleResult fuseBinaryInPlace(RuleContext& ctx);

// (rules/pool.cpp) An op that treats every (sample, channel) alone: input
// 0 the tensor, the rest uniform settings. It runs on a channel-folded value
// as it is, and on a member-leading one with the members folded into the
// batch dim.
RuleResult fuseChannelwise(RuleContext& ctx);

// The rule for `node`, matched by its full schema, or nullptr.
const RuleEntry* findRule(const torch::jit::Node* node);

}  // namespace hfta
