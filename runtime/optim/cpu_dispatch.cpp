// Picks the CPU driver's build for this CPU, once.
#include <cstdlib>
#include <string>

#include "runtime/optim/cpu_loop.h"

#define HFTA_DECLARE_CPU_DRIVER(ISA)                                                                                   \
  namespace hfta::optim::cpu::ISA {                                                                                    \
  template <typename Rule>                                                                                             \
  void updateWith(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states, \
                  const std::vector<typename Rule::Scalars>& scalars, const std::vector<uint8_t>& idle);               \
  void unscaleWith(at::Tensor& grad, const std::vector<float>& inv_scale, std::atomic<uint8_t>* found);                \
  }
HFTA_DECLARE_CPU_DRIVER(DEFAULT)
HFTA_DECLARE_CPU_DRIVER(AVX2)
#undef HFTA_DECLARE_CPU_DRIVER

namespace hfta::optim::cpu {
namespace {

bool useAvx2() {
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

}  // namespace

const char* capability() { return useAvx2() ? "AVX2" : "DEFAULT"; }

void unscale(at::Tensor& grad, const std::vector<float>& inv_scale, std::atomic<uint8_t>* found) {
  if (useAvx2()) {
    AVX2::unscaleWith(grad, inv_scale, found);
  } else {
    DEFAULT::unscaleWith(grad, inv_scale, found);
  }
}

template <typename Rule>
void update(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states,
            const std::vector<typename Rule::Scalars>& scalars, const std::vector<uint8_t>& idle) {
  if (useAvx2()) {
    AVX2::updateWith<Rule>(param, grad, states, scalars, idle);
  } else {
    DEFAULT::updateWith<Rule>(param, grad, states, scalars, idle);
  }
}

#define HFTA_CPU_UPDATE(RULE)                                                                                          \
  template void update<rules::RULE>(at::Tensor&, const at::Tensor&, const std::array<at::Tensor*, rules::kMaxStates>&, \
                                    const std::vector<rules::RULE::Scalars>&, const std::vector<uint8_t>&);
HFTA_FOR_EACH_UPDATE_RULE(HFTA_CPU_UPDATE)
#undef HFTA_CPU_UPDATE

}  // namespace hfta::optim::cpu
