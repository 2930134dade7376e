#pragma once
// An exported member's module tree: a class per module path (named as the
// nodes' nn_module_stack names it: torch.nn.modules.conv.Conv2d), each
// parameter, buffer and tensor attribute under its qualified name, with
// the archive's tensors.
#include <torch/script.h>

#include <string>

#include "io/export/pt2_reader.h"

namespace hfta::exported {

// The tree of `first`'s tensors; `other` (the program of the other mode,
// or null) must hold the same values. UserError naming `label` otherwise.
torch::jit::Module moduleTree(const Program& first, const Program* other, const std::string& label);

// "features.1.attn.lifted_tensor_0": a tensor the forward's code made
// (torch.tensor(count)), which export lifts to a constant input. It is not
// a module attribute: the graph holds it as a constant.
bool isLiftedConstant(const std::string& name);

}  // namespace hfta::exported
