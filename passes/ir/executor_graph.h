#pragma once
// A module's forward as TorchScript's profiling graph executor hands it to
// registered passes when it has profiled nothing (hfta::registerPasses):
// every call inlined, tuples lowered, constants propagated and pooled,
// loops unrolled, lists built at once. hfta-opt and the tests of the graph
// pass run the pass on it as the executor would.
#include <torch/script.h>

namespace hfta {

std::shared_ptr<torch::jit::Graph> executorGraph(const torch::jit::Module& module);

}  // namespace hfta
