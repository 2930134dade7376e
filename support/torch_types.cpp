#include "support/torch_types.h"

#include <regex>

namespace hfta {

std::string withoutMangling(const std::string& name) {
  static const std::regex kMangle(R"(___torch_mangle_\d+\.)");
  return std::regex_replace(name, kMangle, "");
}

std::string demangledTypeName(const c10::TypePtr& type) { return withoutMangling(type->annotation_str()); }

bool containsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& contained : type->containedTypes()) {
    if (containsTensor(contained)) return true;
  }
  return false;
}

}  // namespace hfta
