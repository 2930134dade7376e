#include "io/fused_record.h"

#include "hfta/io.h"

namespace hfta {

bool isFused(const torch::jit::Module& module) {
  return module.hasattr(record::kArraySize) && module.find_method(record::kMemberForward).has_value();
}

bool sharedInput(const torch::jit::Module& fused) {
  return arraySize(fused) > 0 && fused.hasattr(record::kSharedInput) && fused.attr(record::kSharedInput).toBool();
}

int64_t arraySize(const torch::jit::Module& fused) {
  if (!isFused(fused)) {
    throw UserError(
        "this module was not made by hfta-fuse (it has no hfta_array_size); "
        "pass the fused .pt that hfta-fuse wrote");
  }
  return fused.attr(record::kArraySize).toInt();
}

}  // namespace hfta
