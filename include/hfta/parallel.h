#pragma once
// Ensembles fused inside one module (hfta::fuseParallel) or inside one
// graph (hfta::fuseParallelGraph, the pass hfta::registerPasses registers).
//
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
#include <torch/csrc/jit/ir/ir.h>
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

// Fusion inside one graph: the graph of a module's forward with every call
// inlined, as TorchScript's graph executor holds it. No module object is
// needed: the members are found from the graph alone, and their parameters
// stay theirs (an optimizer over module.parameters() keeps working).
//
// Members are sibling submodules of one TorchScript type (the members of an
// nn.ModuleList, parallel branches). Member b's region is the nodes that
// depend on member b and on no other member. B >= 2 regions that are the
// same program (lockstep matching) are rewritten with the engine of
// hfta-fuse: the stacked parameters are computed in the graph
// (aten::stack of the members' own, so gradients reach them), buffers the
// fused ops update are copied back, and the members' outputs are slices of
// the fused outputs. What the graph cannot tell (tensor shapes, a tensor
// two members share, flags like `training`) is checked when it runs: the
// fused code sits in a prim::If whose other branch is the members' original
// code.
//
//   hfta::ParallelGraphFusionReport report = hfta::fuseParallelGraph(graph);
struct ParallelGraphFusionReport {
  struct Group {
    std::vector<std::string> members;  // their paths, e.g. members.0
    bool shared_input = false;
  };
  std::vector<Group> fused;  // in the graph's order: the k-th guarded prim::If
  // Why each group of candidates was left as it was (one line each).
  std::vector<std::string> left;

  std::string text() const;
};

ParallelGraphFusionReport fuseParallelGraph(const std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace hfta
