#pragma once
// Where the hfta runtime library (the hfta:: operators) was loaded from:
// what Python needs for torch.ops.load_library before torch.jit.load of a
// fused module (`hfta-fuse --print-library` prints it).
#include <string>

namespace hfta {

std::string runtimeLibraryPath();

}  // namespace hfta
