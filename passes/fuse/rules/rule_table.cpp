// The flat registration list, and lookup by full schema.
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "passes/fuse/rules/rules.h"

namespace hfta {
namespace {

std::vector<RuleEntry> allRules() {
  std::vector<RuleEntry> all;
  auto add = [&](const std::vector<Rule>& family, const char* label) {
    for (const auto& rule : family) all.push_back({rule.key, label, rule.fuse});
  };
#define HFTA_RULE_FAMILY(name, label) add(rules::name(), label);
#include "passes/fuse/rules/families.def"
#undef HFTA_RULE_FAMILY
  return all;
}

bool isSchemaKey(const std::string& key) { return key.find('(') != std::string::npos; }

// Keyed by the canonical schema string of the registered operator, so a rule
// whose literal names no real operator fails here, at start-up, in tests.
const std::unordered_map<std::string, RuleEntry>& table() {
  static const auto kTable = [] {
    std::unordered_map<std::string, RuleEntry> map;
    for (const auto& rule : allRules()) {
      std::string key = rule.key;
      if (isSchemaKey(key)) {
        auto op = torch::jit::getOperatorForLiteral(rule.key);
        if (!op) throw std::logic_error(fmt::format("hfta rule for unknown operator {}", key));
        key = toString(op->schema());
      }
      if (!map.emplace(key, rule).second) {
        throw std::logic_error(fmt::format("two hfta rules for {}", key));
      }
    }
    return map;
  }();
  return kTable;
}

}  // namespace

// By full schema first; prim nodes (some have a schema, some not) also by kind.
const RuleEntry* findRule(const torch::jit::Node* node) {
  const auto& rules = table();
  if (const auto* schema = node->maybeSchema()) {
    auto it = rules.find(toString(*schema));
    if (it != rules.end()) return &it->second;
  }
  if (node->kind().is_prim()) {
    auto it = rules.find(node->kind().toQualString());
    if (it != rules.end()) return &it->second;
  }
  return nullptr;
}

}  // namespace hfta
