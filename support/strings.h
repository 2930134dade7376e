#pragma once
// String helpers C++17's std::string lacks.
#include <string_view>

namespace hfta {

inline bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace hfta
