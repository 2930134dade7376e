#include "runtime/cpu_isa.h"

#include <cstdlib>
#include <string>

namespace hfta::runtime {

bool useAvx2Kernels() {
#if defined(__x86_64__)
  static const bool kAvx2 = [] {
    const char* asked = std::getenv("ATEN_CPU_CAPABILITY");
    if (asked != nullptr && std::string(asked) == "default") return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return kAvx2;
#else
  return false;
#endif
}

}  // namespace hfta::runtime
