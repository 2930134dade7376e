#pragma once
// An exported member's forward as a TorchScript graph: the training
// program's nodes run in train(), the evaluation program's in eval()
// (prim::If on the module's `training`); a mode without a program raises;
// one program serving both runs without a branch.
#include <torch/script.h>

#include <array>
#include <memory>
#include <string>

#include "io/export/pt2_reader.h"

namespace hfta::exported {

// by_mode: {training program, evaluation program}; either may be null, or
// both the same program. `root` is the module the graph's self reads
// (moduleTree). UserError naming `label` for what cannot be translated.
std::shared_ptr<torch::jit::Graph> buildForward(const torch::jit::Module& root,
                                                const std::array<const Program*, 2>& by_mode, const std::string& label);

}  // namespace hfta::exported
