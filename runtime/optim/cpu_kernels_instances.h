// The rules the CPU driver is built for, in the including file's
// instruction set (CPU_CAPABILITY).
namespace hfta::optim::cpu {
inline namespace CPU_CAPABILITY {
#define HFTA_CPU_RULE(RULE)                                                                \
  template void updateWith<rules::RULE>(at::Tensor&, const at::Tensor&,                    \
                                        const std::array<at::Tensor*, rules::kMaxStates>&, \
                                        const std::vector<rules::RULE::Scalars>&, const std::vector<uint8_t>&);
HFTA_FOR_EACH_UPDATE_RULE(HFTA_CPU_RULE)
#undef HFTA_CPU_RULE
}  // namespace CPU_CAPABILITY
}  // namespace hfta::optim::cpu
