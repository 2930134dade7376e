// hfta::split: member `index` of a fused module as a plain module, its
// classes renamed back, its tensors sliced out of the stacked ones, and the
// member's own forward that hfta::fuse kept in the record.
#include <fmt/format.h>

#include "hfta/io.h"
#include "io/fused_record.h"
#include "io/module_mirror.h"
#include "support/torch_types.h"

namespace hfta {

torch::jit::Module split(const torch::jit::Module& fused, int64_t index) {
  const int64_t array_size = arraySize(fused);
  if (index < 0 || index >= array_size) {
    throw UserError(
        fmt::format("member index {} is out of range: this fused module has {} members "
                    "(0 to {})",
                    index, array_size, array_size - 1));
  }
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  ClassMap classes;
  TensorMemo slice([index](const at::Tensor& stacked) {
    return stacked.select(0, index).detach().clone().requires_grad_(stacked.requires_grad());
  });
  auto plain_name = [](const std::string& name) {
    const std::string plain = withoutMangling(name);
    const std::string prefix = record::kFusedClassPrefix;
    return plain.rfind(prefix, 0) == 0 ? "__torch__." + plain.substr(prefix.size()) : plain;
  };
  torch::jit::Module member = mirror(fused, cu, classes, plain_name, slice, true);
  auto forward = fused.get_method(record::kMemberForward).graph()->copy();
  retypeGraph(*forward, classes);
  addMethod(member, "forward", forward);
  return member;
}

}  // namespace hfta
