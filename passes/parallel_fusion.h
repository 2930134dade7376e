#pragma once
// Fusion inside one module: an ensemble (an nn.ModuleList of B identical
// members applied to one input or to B inputs) or B parallel branches.
// Each group of B >= 2 calls to `forward` of sibling submodules of one type,
// mutually independent, runs as one call of the members fused by
// hfta::fuse (the same engine and rules as hfta-fuse); the members' outputs
// come from slices of the fused output, so the rest of the graph is
// unchanged.
//
//   torch::jit::Module ensemble = torch::jit::load("ensemble.pt");
//   hfta::ParallelFusionReport report = hfta::fuseParallel(ensemble);
//   hfta::saveModule(ensemble, "ensemble_fused.pt");
#include <torch/script.h>

#include <string>
#include <vector>

namespace hfta {

struct ParallelFusionReport {
  struct Group {
    std::vector<std::string> members;  // their paths, e.g. members.0
    std::string fused;                 // the submodule that now holds them
    bool shared_input = false;
  };
  std::vector<Group> fused;
  // Why each group of candidates was left as it was (one line each).
  std::vector<std::string> left;

  std::string text() const;
};

// Rewrites `module`'s forward in place; the fused members are registered as
// submodules hfta_parallel_0, 1, ... with stacked parameters, initialized
// from the members'. The members stay in the module, unused by forward;
// their parameters and buffers become detached views of their slices of
// the stacked tensors, so they follow training and a saved module's
// members hold the trained values, while the parameters that require grad
// (what an optimizer should get) are the stacked ones.
ParallelFusionReport fuseParallel(torch::jit::Module& module);

}  // namespace hfta
