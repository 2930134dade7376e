#include "support/error_summary.h"

#include <c10/util/Exception.h>

namespace hfta {

std::string errorSummary(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : error.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    return text.substr(text.rfind('\n') + 1);
  }
  return text.substr(0, text.find('\n'));
}

}  // namespace hfta
