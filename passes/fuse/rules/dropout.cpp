// Dropout draws one mask element per tensor element, so on the [B, ...]
// array every member gets its own mask: it fuses as an element-wise op. A
// shared (uniform) input is expanded to B members first so that members do
// not share a mask. (Channel dropout is in rules/pool.cpp.)
#include "passes/fuse/rules/rules.h"

namespace hfta {

std::vector<Rule> rules::dropout() {
  return {
      {"aten::dropout(Tensor input, float p, bool train) -> Tensor", fusePerElement},
      {"aten::dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)", fusePerElementInPlace},
  };
}

}  // namespace hfta
