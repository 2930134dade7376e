// hfta-opt: an mlir-opt-style driver for the passes, for lit tests and for
// people. Reads TorchScript IR text (one file per member, or one file and
// --array-size B) or one module (.pt, or a torch.export .pt2), runs the named passes in
// order, each on what the one before left (passes/opt/registry.h), and
// prints the resulting IR; --report prints what the passes said.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "hfta/hfta.h"
#include "passes/opt/registry.h"
#include "tools/tool_main.h"

namespace {

std::shared_ptr<torch::jit::Graph> parseFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw hfta::UserError(fmt::format("{}: no such file", path));
  std::stringstream text;
  text << in.rdbuf();
  return hfta::parseGraph(text.str(), path);
}

// A TorchScript module (.pt) or torch.export archive (.pt2), not IR text.
bool isModuleFile(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot != std::string::npos && (path.substr(dot) == ".pt" || path.substr(dot) == ".pt2");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run hfta passes on TorchScript IR text or a module and print the result.", "hfta-opt"};
  std::vector<std::string> files, pass_names;
  int64_t array_size = 0;
  bool report = false;
  std::string output;
  hfta::PassState state;
  std::string pass_help = "a pass to run (repeatable, in order; none: print the input's graph):";
  for (const auto& pass : hfta::registeredPasses()) pass_help += fmt::format("\n  {}: {}", pass.name, pass.summary);
  app.add_option("files", files,
                 "TorchScript IR text, one file per member (or one, with --array-size), or a module (.pt, or a "
                 "torch.export .pt2: its translation)")
      ->required();
  app.add_option("--pass", pass_names, pass_help);
  app.add_option("--array-size,-B", array_size, "members, as copies of the single input file");
  app.add_option("--shared-inputs", state.shared_inputs, "indices of tensor inputs that all members share (fuse)")
      ->delimiter(',');
  app.add_flag("--report", report, "print what the passes report to stderr");
  app.add_option("-o", output, "save the module the passes leave there (.pt input)");

  return hfta::tools::runTool(app, argc, argv, [&] {
    std::vector<const hfta::RegisteredPass*> pipeline;
    for (const auto& name : pass_names) pipeline.push_back(&hfta::findPass(name));
    if (files.size() > 1 && std::any_of(files.begin(), files.end(), isModuleFile)) {
      throw hfta::UserError("hfta-opt reads one module (.pt, .pt2), or IR text files (one per member)");
    }
    if (files.size() == 1 && isModuleFile(files[0])) {
      hfta::tools::checkInputs(files, "module");
      if (!output.empty()) hfta::tools::checkNotAnInput(output, files, "-o");
      state.module = hfta::loadMembers(files)[0].module;
    } else if (files.size() == 1) {
      if (array_size < 2) throw hfta::UserError("with one input file, give --array-size B (B >= 2)");
      for (int64_t b = 0; b < array_size; ++b) {
        state.graphs.push_back({parseFile(files[0]), fmt::format("graph {} ({})", b, files[0])});
      }
    } else {
      if (array_size != 0 && array_size != static_cast<int64_t>(files.size())) {
        throw hfta::UserError(fmt::format("--array-size {} but {} files were given", array_size, files.size()));
      }
      for (size_t b = 0; b < files.size(); ++b) {
        state.graphs.push_back({parseFile(files[b]), fmt::format("graph {} ({})", b, files[b])});
      }
    }
    if (!output.empty() && !state.module) throw hfta::UserError("-o saves a module: give one .pt or .pt2 file");
    for (const auto* pass : pipeline) pass->run(state);
    if (report) {
      for (const auto& text : state.reports) std::cerr << text;
    }
    if (!output.empty() && !state.graphs.empty()) {
      throw hfta::UserError("-o saves the module, but the passes left a graph of it (which is not saved): drop -o");
    }
    std::cout << *hfta::resultGraph(state);
    if (!output.empty()) hfta::saveModule(*state.module, output);
    return 0;
  });
}
