#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

#include "hfta/hfta.h"

namespace hfta {
namespace {

std::string entryLine(const FusionReport::Entry& e) {
  return fmt::format("  {:<28} {:<24} {}\n", e.node, e.source.empty() ? "-" : e.source, e.detail);
}

nlohmann::json entriesJson(const std::vector<FusionReport::Entry>& entries, const char* detail_key) {
  auto out = nlohmann::json::array();
  for (const auto& e : entries) {
    out.push_back({{"node", e.node}, {"source", e.source}, {detail_key, e.detail}});
  }
  return out;
}

}  // namespace

std::string FusionReport::text() const {
  std::map<std::string, int> by_family;
  for (const auto& e : fused) ++by_family[e.detail];
  std::string families;
  for (const auto& [family, count] : by_family) {
    families += fmt::format("{}{} {}", families.empty() ? "" : ", ", count, family);
  }
  std::string out = fmt::format(
      "fusion report: {} members; {} nodes fused{}, {} fallback nodes (run per member), "
      "{} uniform nodes kept as they are, {} layout conversions\n",
      array_size, fused.size(), families.empty() ? "" : " (" + families + ")", fallbacks.size(), uniform_nodes,
      layout_conversions);
  if (!fallbacks.empty()) {
    out += "fallbacks (correct, but not fused):\n";
    for (const auto& e : fallbacks) out += entryLine(e);
  }
  if (!fused.empty()) {
    out += "fused:\n";
    for (const auto& e : fused) out += entryLine(e);
  }
  if (!segments.empty()) {
    out += fmt::format("segments (plans measured at first use, kept under {}):\n", plan_graph);
    for (size_t i = 0; i < segments.size(); ++i) {
      const auto& s = segments[i];
      out += fmt::format("  {:<3} {:<24} .. {:<24} {:>4} nodes  {}\n", i, s.first_source.empty() ? "-" : s.first_source,
                         s.last_source.empty() ? "-" : s.last_source, s.nodes, s.plans);
    }
  }
  return out;
}

std::string FusionReport::json() const {
  nlohmann::json j = {{"array_size", array_size},
                      {"uniform_nodes", uniform_nodes},
                      {"layout_conversions", layout_conversions},
                      {"fused", entriesJson(fused, "rule")},
                      {"fallbacks", entriesJson(fallbacks, "reason")},
                      {"plan_graph", plan_graph},
                      {"segments", nlohmann::json::array()}};
  for (const auto& s : segments) {
    j["segments"].push_back(
        {{"first_source", s.first_source}, {"last_source", s.last_source}, {"nodes", s.nodes}, {"plans", s.plans}});
  }
  return j.dump(2);
}

}  // namespace hfta
