#include "runtime/library_path.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>

namespace hfta {

std::string runtimeLibraryPath() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&runtimeLibraryPath), &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  return ::realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
}

}  // namespace hfta
