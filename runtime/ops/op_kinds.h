#pragma once
// hfta's own operators as the passes name them: hfta::kind::linear() is the
// Symbol hfta::linear, one function per operator of runtime/ops/ops.def (the
// list the runtime registers), so a pass cannot name an operator the
// runtime lacks.
#include <ATen/core/symbol.h>

namespace hfta::kind {

#define HFTA_OP(name, signature)                                                   \
  inline c10::Symbol name() {                                                      \
    static const c10::Symbol symbol = c10::Symbol::fromQualString("hfta::" #name); \
    return symbol;                                                                 \
  }
#define HFTA_RANDOM_OP(name, signature) HFTA_OP(name, signature)
#define HFTA_OP_OVERLOAD(name, overload, signature, kernel)
#define HFTA_HELPER(name, signature, kernel) HFTA_OP(name, signature)
#include "runtime/ops/ops.def"
#undef HFTA_OP
#undef HFTA_RANDOM_OP
#undef HFTA_OP_OVERLOAD
#undef HFTA_HELPER

}  // namespace hfta::kind
