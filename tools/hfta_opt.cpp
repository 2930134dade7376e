// hfta-opt: an mlir-opt-style driver for the passes, for lit tests and for
// people. Reads TorchScript IR text, runs the named passes, prints the IR.
// With one file and --array-size B, the members are B copies of it; with
// several files, each file is one member. The module pass
// hfta-fuse-parallel reads one TorchScript module (.pt) instead and prints
// its rewritten forward graph (--report: what it fused, and why not);
// hfta-fuse-parallel-graph runs the graph pass that hfta::registerPasses()
// registers on that module's forward, inlined and cleaned up as the graph
// executor does before it runs registered passes.
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "passes/graph_fuser.h"
#include "passes/hfta/hfta.h"
#include "passes/inline_calls.h"
#include "passes/lockstep.h"
#include "passes/parallel_fusion.h"
#include "passes/parallel_graph_fusion.h"
#include "tools/tool_main.h"

namespace {

using GraphPtr = std::shared_ptr<torch::jit::Graph>;

struct PassInput {
  std::vector<hfta::MemberGraph> members;
  std::vector<size_t> shared_inputs;  // tensor inputs all members share
  bool report = false;
};

GraphPtr parseFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw hfta::UserError(fmt::format("{}: no such file", path));
  std::stringstream text;
  text << in.rdbuf();
  auto graph = std::make_shared<torch::jit::Graph>();
  try {
    torch::jit::parseIR(text.str(), graph.get());
  } catch (const std::exception& e) {
    throw hfta::UserError(fmt::format("{} is not valid TorchScript IR: {}", path, e.what()));
  }
  return graph;
}

// Every pass returns the graph to print.
using Pass = std::function<GraphPtr(PassInput&)>;

GraphPtr verifyLockstep(PassInput& input) {
  hfta::verifyGraphsInLockstep(input.members);
  return input.members[0].graph;
}

GraphPtr fuse(PassInput& input) {
  hfta::verifyGraphsInLockstep(input.members);
  const auto& tmpl = *input.members[0].graph;
  std::vector<hfta::ValueKind> kinds;
  for (size_t i = 0; i < tmpl.inputs().size(); ++i) {
    const bool shared = std::count(input.shared_inputs.begin(), input.shared_inputs.end(), i) > 0;
    kinds.push_back(hfta::containsTensor(tmpl.inputs()[i]->type()) && !shared
                        ? hfta::ValueKind::Array
                        : hfta::ValueKind::Uniform);
  }
  hfta::FusionReport report;
  auto fused = hfta::fuseMemberGraph(tmpl, static_cast<int64_t>(input.members.size()), kinds, report);
  if (input.report) std::cerr << report.text();
  return fused;
}

// `module`'s forward as the graph executor hands it to registered passes
// when no gradient is seen: inlined, loops unrolled, lists built at once.
GraphPtr executorGraph(const torch::jit::Module& module) {
  auto graph = module.get_method("forward").graph()->copy();
  hfta::inlineAllCalls(*graph);
  torch::jit::LowerSimpleTuples(graph);
  torch::jit::EliminateDeadCode(graph);
  torch::jit::EliminateCommonSubexpression(graph);
  torch::jit::PeepholeOptimize(graph);
  torch::jit::ConstantPropagation(graph);
  torch::jit::ConstantPooling(graph);
  torch::jit::UnrollLoops(graph);
  torch::jit::RemoveListMutation(graph);
  torch::jit::PeepholeOptimize(graph);
  torch::jit::EliminateCommonSubexpression(graph);
  return graph;
}

const std::map<std::string, Pass>& passes() {
  static const std::map<std::string, Pass> kPasses{{"verify-lockstep", verifyLockstep},
                                                    {"fuse", fuse}};
  return kPasses;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run hfta passes on TorchScript IR text and print the result.", "hfta-opt"};
  std::vector<std::string> files, pass_names;
  int64_t array_size = 0;
  PassInput input;
  app.add_option("files", files, "TorchScript IR text, one file per member (or one, with --array-size)")
      ->required();
  app.add_option("--pass", pass_names, "a pass to run (repeatable, in order)")->required();
  app.add_option("--array-size,-B", array_size, "members, as copies of the single input file");
  app.add_option("--shared-inputs", input.shared_inputs,
                 "indices of tensor inputs that all members share (fuse)")->delimiter(',');
  app.add_flag("--report", input.report, "print the fusion report to stderr");

  std::string output;
  app.add_option("-o", output, "hfta-fuse-parallel: also save the rewritten module there");

  return hfta::tools::runTool(app, argc, argv, [&] {
    if (std::count(pass_names.begin(), pass_names.end(), "hfta-fuse-parallel")) {
      if (pass_names.size() != 1 || files.size() != 1) {
        throw hfta::UserError("hfta-fuse-parallel runs alone, on one module (.pt)");
      }
      auto module = hfta::loadMembers(files)[0].module;
      const auto report = hfta::fuseParallel(module);
      if (input.report) std::cerr << report.text();
      std::cout << *module.get_method("forward").graph();
      if (!output.empty()) hfta::saveModule(module, output);
      return 0;
    }
    if (std::count(pass_names.begin(), pass_names.end(), "hfta-fuse-parallel-graph")) {
      if (pass_names.size() != 1 || files.size() != 1 || !output.empty()) {
        throw hfta::UserError("hfta-fuse-parallel-graph runs alone, on one module (.pt), and saves nothing");
      }
      auto module = hfta::loadMembers(files)[0].module;
      auto graph = executorGraph(module);
      const auto report = hfta::fuseParallelGraph(graph);
      if (input.report) std::cerr << report.text();
      graph->lint();
      std::cout << *graph;
      return 0;
    }
    for (const auto& name : pass_names) {
      if (!passes().count(name)) {
        std::vector<std::string> known;
        for (const auto& [k, v] : passes()) known.push_back(k);
        throw hfta::UserError(fmt::format("unknown pass '{}'; known passes: {}", name, fmt::join(known, ", ")));
      }
    }
    if (files.size() == 1) {
      if (array_size < 2) throw hfta::UserError("with one input file, give --array-size B (B >= 2)");
      for (int64_t b = 0; b < array_size; ++b) {
        input.members.push_back({parseFile(files[0]), fmt::format("graph {} ({})", b, files[0])});
      }
    } else {
      if (array_size != 0 && array_size != static_cast<int64_t>(files.size())) {
        throw hfta::UserError(fmt::format("--array-size {} but {} files were given", array_size, files.size()));
      }
      for (size_t b = 0; b < files.size(); ++b) {
        input.members.push_back({parseFile(files[b]), fmt::format("graph {} ({})", b, files[b])});
      }
    }
    GraphPtr result;
    for (const auto& name : pass_names) result = passes().at(name)(input);
    std::cout << *result;
    return 0;
  });
}
