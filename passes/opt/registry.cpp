#include "passes/opt/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <algorithm>

#include "hfta/hfta.h"
#include "hfta/parallel.h"
#include "passes/fuse/graph_fuser.h"
#include "passes/ir/executor_graph.h"
#include "passes/ir/walk.h"
#include "support/error_summary.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

const torch::jit::Module& moduleOf(const PassState& state, const std::string& pass) {
  if (!state.module || !state.graphs.empty()) {
    throw UserError(
        fmt::format("{} works on a module: give one .pt file (and no pass before it that turns the "
                    "module into graphs)",
                    pass));
  }
  return *state.module;
}

// One graph: the input's, or the module's forward as the graph executor holds it.
std::shared_ptr<torch::jit::Graph>& oneGraph(PassState& state, const std::string& pass) {
  if (state.graphs.empty() && state.module) state.graphs.push_back({executorGraph(*state.module), "forward"});
  if (state.graphs.size() != 1) {
    throw UserError(fmt::format("{} works on one graph; the input has {}", pass, state.graphs.size()));
  }
  return state.graphs[0].graph;
}

void requireMembers(const PassState& state, const std::string& pass) {
  if (state.graphs.size() < 2) {
    throw UserError(
        fmt::format("{} works on the graphs of B >= 2 members (one IR file each, or one with "
                    "--array-size B); the input has {}",
                    pass, state.graphs.size()));
  }
}

void verifyLockstepPass(PassState& state) {
  requireMembers(state, "verify-lockstep");
  verifyGraphsInLockstep(state.graphs);
}

void fusePass(PassState& state) {
  requireMembers(state, "fuse");
  verifyGraphsInLockstep(state.graphs);
  const auto& tmpl = *state.graphs[0].graph;
  std::vector<ValueKind> kinds;
  for (size_t i = 0; i < tmpl.inputs().size(); ++i) {
    const bool shared = std::count(state.shared_inputs.begin(), state.shared_inputs.end(), i) > 0;
    kinds.push_back(containsTensor(tmpl.inputs()[i]->type()) && !shared ? ValueKind::Array : ValueKind::Uniform);
  }
  FusionReport report;
  auto fused = fuseMemberGraph(tmpl, static_cast<int64_t>(state.graphs.size()), kinds, report);
  state.graphs = {{fused, "fused"}};
  state.reports.push_back(report.text());
}

void executorGraphPass(PassState& state) {
  moduleOf(state, "executor-graph");
  oneGraph(state, "executor-graph");
}

void fuseParallelPass(PassState& state) {
  moduleOf(state, "fuse-parallel");
  state.reports.push_back(fuseParallel(*state.module).text());
}

void fuseParallelGraphPass(PassState& state) {
  auto& graph = oneGraph(state, "fuse-parallel-graph");
  state.reports.push_back(fuseParallelGraph(graph).text());
  graph->lint();
}

}  // namespace

const std::vector<RegisteredPass>& registeredPasses() {
  static const std::vector<RegisteredPass> kPasses{
      {"verify-lockstep", "check that B member graphs are the same program (lockstep matching)", verifyLockstepPass},
      {"fuse", "fuse B member graphs into one graph that runs them all (the engine of hfta-fuse)", fusePass},
      {"executor-graph", "a module's forward as the graph executor holds it: inlined, loops unrolled",
       executorGraphPass},
      {"fuse-parallel", "fuse a module's parallel member calls (hfta::fuseParallel)", fuseParallelPass},
      {"fuse-parallel-graph",
       "fuse the parallel members of one graph behind a run-time check (hfta::fuseParallelGraph, the pass "
       "hfta::registerPasses registers); on a module, its executor graph",
       fuseParallelGraphPass},
  };
  return kPasses;
}

const RegisteredPass& findPass(const std::string& name) {
  const auto& passes = registeredPasses();
  const auto it = std::find_if(passes.begin(), passes.end(), [&](const RegisteredPass& p) { return p.name == name; });
  if (it != passes.end()) return *it;
  std::vector<std::string> known;
  for (const auto& p : passes) known.push_back(p.name);
  std::sort(known.begin(), known.end());
  throw UserError(fmt::format("unknown pass '{}'; known passes: {}", name, fmt::join(known, ", ")));
}

std::shared_ptr<torch::jit::Graph> parseGraph(const std::string& text, const std::string& source) {
  auto graph = std::make_shared<torch::jit::Graph>();
  try {
    torch::jit::parseIR(text, graph.get());
    graph->lint();
    // A constant the parser took without its value (a misspelt attribute).
    forEachNode(graph->block(), [](torch::jit::Node* node) {
      if (node->kind() == c10::prim::Constant) torch::jit::toIValue(node->output());
    });
    // An op no one registered (a misspelt kind): alias analysis, which the
    // passes run, knows every op and refuses the others.
    torch::jit::AliasDb check_ops(graph);
  } catch (const std::exception& e) {
    throw UserError(fmt::format("{} is not valid TorchScript IR: {}", source, errorSummary(e)));
  }
  return graph;
}

std::shared_ptr<torch::jit::Graph> resultGraph(const PassState& state) {
  if (state.graphs.size() == 1 || (!state.module && !state.graphs.empty())) return state.graphs[0].graph;
  return state.module->get_method("forward").graph();
}

}  // namespace hfta
