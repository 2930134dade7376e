#pragma once
// hfta's graph pass inside TorchScript: after hfta::registerPasses(), a
// C++ program that loads a scripted ensemble (B parallel members) and runs
// it gets the members fused, with no other change.
//
//   hfta::registerPasses();
//   torch::jit::Module ensemble = torch::jit::load("ensemble.pt");
//   ensemble.forward({x});  // runs fused from the first call
//
// Linking the library hfta_register (with --no-as-needed) calls it at load
// time instead.
namespace hfta {

// Registers hfta::fuseParallelGraph as a TorchScript pre-fusion pass (once;
// later calls do nothing), and makes the profiling graph executor build its
// optimized plan without a profiling run: TorchScript runs registered passes
// only after it has split a graph that needs gradients into differentiable
// subgraphs, one per member, where no pass can see the members together;
// with no profiling run, it sees no tensor that needs a gradient and hands
// the pass the whole graph, which then runs under autograd like eager
// PyTorch. This is process-wide: every scripted function optimized after
// the call runs without the profiling executor's differentiable subgraphs
// and profiled fusion. With the environment variable HFTA_LOG set, what
// the pass fused and why it left the rest goes to standard error. (With
// torch::jit::setGraphExecutorOptimize(false) TorchScript runs no
// registered pass, and nothing is fused.)
void registerPasses();

}  // namespace hfta
