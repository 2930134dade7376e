// The hfta:: operators (runtime/ops/ops.def) registered with their kernels.
#include <torch/library.h>

#include "runtime/ops/ops.h"

TORCH_LIBRARY(hfta, m) {
#define HFTA_OP(name, signature) m.def(#name signature);
#define HFTA_RANDOM_OP(name, signature) m.def(torch::schema(#name signature, c10::AliasAnalysisKind::CONSERVATIVE));
#define HFTA_OP_OVERLOAD(name, overload, signature, kernel) m.def(#name "." #overload signature);
#define HFTA_HELPER(name, signature, kernel) m.def(#name signature, kernel);
#include "runtime/ops/ops.def"
#undef HFTA_OP
#undef HFTA_RANDOM_OP
#undef HFTA_OP_OVERLOAD
#undef HFTA_HELPER
}

TORCH_LIBRARY_IMPL(hfta, CompositeImplicitAutograd, m) {
#define HFTA_OP(name, signature) m.impl(#name, hfta::ops::name);
#define HFTA_RANDOM_OP(name, signature) HFTA_OP(name, signature)
#define HFTA_OP_OVERLOAD(name, overload, signature, kernel) m.impl(#name "." #overload, kernel);
#define HFTA_HELPER(name, signature, kernel)
#include "runtime/ops/ops.def"
#undef HFTA_OP
#undef HFTA_RANDOM_OP
#undef HFTA_OP_OVERLOAD
#undef HFTA_HELPER
}
