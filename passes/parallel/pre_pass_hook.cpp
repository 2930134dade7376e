// hfta::registerPasses: fuseParallelGraph as a TorchScript pre-pass, which
// the graph executor runs on every graph it optimizes (registerPrePass).
#include <torch/csrc/jit/passes/pass_manager.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <cstdlib>
#include <iostream>
#include <mutex>

#include "hfta/parallel.h"
#include "hfta/register.h"

namespace hfta {
namespace {

// The pass as TorchScript runs it: on a copy, which replaces the graph only
// if the rewrite went through whole; it never throws into the executor.
void fuseParallelPrePass(std::shared_ptr<torch::jit::Graph>& graph) {
  const bool log = std::getenv("HFTA_LOG") != nullptr;
  try {
    auto rewritten = graph->copy();
    const auto report = fuseParallelGraph(rewritten);
    if (log && (!report.fused.empty() || !report.left.empty())) std::cerr << "hfta: " << report.text();
    if (report.fused.empty()) return;
    rewritten->lint();
    graph = rewritten;
  } catch (const std::exception& e) {
    if (log) std::cerr << "hfta: parallel fusion left the graph as it was: " << e.what() << "\n";
  }
}

}  // namespace

void registerPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::getNumProfiledRuns() = 0;
    torch::jit::registerPrePass(fuseParallelPrePass);
  });
}

}  // namespace hfta
