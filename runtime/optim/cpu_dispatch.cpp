// Picks the CPU driver's build for this CPU, once.
#include "runtime/cpu_isa.h"
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

const char* capability() { return runtime::useAvx2Kernels() ? "AVX2" : "DEFAULT"; }

void unscale(at::Tensor& grad, const std::vector<float>& inv_scale, std::atomic<uint8_t>* found) {
  if (runtime::useAvx2Kernels()) {
    AVX2::unscaleWith(grad, inv_scale, found);
  } else {
    DEFAULT::unscaleWith(grad, inv_scale, found);
  }
}

template <typename Rule>
void update(at::Tensor& param, const at::Tensor& grad, const std::array<at::Tensor*, rules::kMaxStates>& states,
            const std::vector<typename Rule::Scalars>& scalars, const std::vector<uint8_t>& idle) {
  if (runtime::useAvx2Kernels()) {
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
