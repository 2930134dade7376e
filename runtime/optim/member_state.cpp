#include "runtime/optim/member_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace hfta {

c10::IValue gatherListEntry(const std::vector<MemberOfState>& picks, const std::string& key) {
  if (picks.empty()) throw std::invalid_argument("no members to gather");
  std::optional<c10::impl::GenericList> gathered;
  for (const auto& pick : picks) {
    const auto dict = pick.state.toGenericDict();
    if (!dict.contains(key)) throw std::invalid_argument(fmt::format("a state has no \"{}\"", key));
    const auto list = dict.at(key).toList();
    if (pick.member < 0 || pick.member >= static_cast<int64_t>(list.size())) {
      throw std::invalid_argument(
          fmt::format("\"{}\" holds {} members, member {} was asked for", key, list.size(), pick.member));
    }
    if (!gathered) gathered.emplace(list.elementType());
    gathered->push_back(list.get(pick.member));
  }
  return *gathered;
}

c10::IValue sameEntry(const std::vector<MemberOfState>& picks, const std::string& key, const std::string& what) {
  if (picks.empty()) throw std::invalid_argument("no members to gather");
  auto text = [](const c10::IValue& v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  const auto first = picks[0].state.toGenericDict().at(key);
  for (const auto& pick : picks) {
    const auto value = pick.state.toGenericDict().at(key);
    if (value != first) {
      throw std::invalid_argument(
          fmt::format("members with different {} ({} and {}) cannot share an array", what, text(first), text(value)));
    }
  }
  return first;
}

c10::IValue gatherListDict(const std::vector<MemberOfState>& picks, const std::vector<std::string>& same) {
  if (picks.empty()) throw std::invalid_argument("no members to gather");
  c10::impl::GenericDict gathered(c10::StringType::get(), c10::AnyType::get());
  for (const auto& entry : picks[0].state.toGenericDict()) {
    const auto& key = entry.key().toStringRef();
    const bool uniform = std::find(same.begin(), same.end(), key) != same.end();
    gathered.insert(key, uniform ? sameEntry(picks, key, key) : gatherListEntry(picks, key));
  }
  return gathered;
}

}  // namespace hfta
