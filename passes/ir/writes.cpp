#include "passes/ir/writes.h"

#include "passes/ir/walk.h"

namespace hfta {

std::vector<size_t> writtenInputs(const torch::jit::Node* node) {
  std::vector<size_t> written;
  const auto* schema = node->maybeSchema();
  if (schema == nullptr) return written;
  const auto& args = schema->arguments();
  for (size_t i = 0; i < args.size() && i < node->inputs().size(); ++i) {
    const auto* info = args[i].alias_info();
    if (info != nullptr && info->isWrite()) written.push_back(i);
  }
  return written;
}

bool writesInPlace(const torch::jit::Node* node) {
  if (!writtenInputs(node).empty()) return true;
  for (const auto* block : node->blocks()) {
    if (anyNode(block, [](const torch::jit::Node* inner) { return !writtenInputs(inner).empty(); })) return true;
  }
  return false;
}

bool writesTo(const torch::jit::Block* block, std::set<const torch::jit::Value*>& aliases) {
  for (const torch::jit::Node* node : block->nodes()) {
    for (const auto* inner : node->blocks()) {
      if (writesTo(inner, aliases)) return true;
    }
    const auto* schema = node->maybeSchema();
    if (schema == nullptr) {  // If / Loop: an output may be a block's alias of the input
      for (const auto* inner : node->blocks()) {
        for (size_t i = 0; i < inner->outputs().size() && i < node->outputs().size(); ++i) {
          if (aliases.count(inner->outputs()[i])) aliases.insert(node->outputs()[i]);
        }
      }
      continue;
    }
    for (size_t i : writtenInputs(node)) {
      if (aliases.count(node->input(i))) return true;
    }
    const auto& args = schema->arguments();
    const auto& returns = schema->returns();
    for (size_t j = 0; j < returns.size() && j < node->outputs().size(); ++j) {
      const auto* out_info = returns[j].alias_info();
      if (out_info == nullptr) continue;
      for (size_t i = 0; i < args.size() && i < node->inputs().size(); ++i) {
        const auto* info = args[i].alias_info();
        if (info != nullptr && aliases.count(node->input(i)) && info->beforeSets() == out_info->beforeSets()) {
          aliases.insert(node->outputs()[j]);  // a view of the input
        }
      }
    }
  }
  return false;
}

}  // namespace hfta
