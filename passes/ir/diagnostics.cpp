#include "passes/ir/diagnostics.h"

#include <fmt/format.h>

namespace hfta {
namespace {

// The user's own line for a node: after inlining, the call in the member's
// forward that led to it (`self.fc1(x)`, not the line inside nn.Linear).
// A loaded module's ranges point at the code TorchScript saved; the range
// that generated that code is the user's source.
std::optional<torch::jit::SourceRange> userRange(const torch::jit::Node* node) {
  std::vector<torch::jit::SourceRange> candidates;
  if (const auto callstack = node->callstack()) candidates.push_back((*callstack)->source_range());
  candidates.push_back(node->sourceRange());
  for (const auto& range : candidates) {
    if (!range.source()) continue;
    const auto original = range.findSourceRangeThatGenerated();
    const auto& user = original ? *original : range;
    const auto flc = user.file_line_col();
    if (flc && !std::get<0>(*flc).empty()) return user;
  }
  return std::nullopt;
}

std::string trimmed(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  const auto last = s.find_last_not_of(" \t\r");
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

}  // namespace

std::string sourceLine(const torch::jit::Node* node) {
  const auto range = userRange(node);
  if (!range) return "";
  const auto flc = range->file_line_col();
  if (!flc) return "";
  const auto& [file, line, col] = *flc;
  return fmt::format("{}:{}", file, line);
}

std::string describeNode(const torch::jit::Node* node) {
  const auto range = userRange(node);
  const std::string where = sourceLine(node);
  if (!range || where.empty()) return fmt::format("`{}` (no source line recorded)", node->kind().toQualString());
  // The first line of the node's own text is what the user wrote.
  std::string text = range->text().str();
  text = trimmed(text.substr(0, text.find('\n')));
  return fmt::format("`{}` at {}: `{}`", node->kind().toQualString(), where, text);
}

}  // namespace hfta
