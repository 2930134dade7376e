// hfta-fuse: B TorchScript models of one topology -> one fused module.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "passes/hfta/hfta.h"
#include "tools/tool_main.h"

int main(int argc, char** argv) {
  CLI::App app{"Fuse B TorchScript models of the same topology into one module that trains "
               "them all at once.",
               "hfta-fuse"};
  std::vector<std::string> inputs;
  std::string output, report_json;
  bool shared_input = false, report = false, print_graph = false;
  app.add_option("models", inputs, "the members: .pt files from torch.jit.save")->required();
  app.add_option("-o,--output", output, "where to write the fused module (.pt)")->required();
  app.add_flag("--shared-input", shared_input,
               "all members see one shared input (forward takes it unstacked)");
  app.add_flag("--report", report, "print what was fused and what fell back, and why");
  app.add_option("--report-json", report_json, "write the fusion report as JSON to this file");
  app.add_flag("--print-graph", print_graph, "print the fused forward graph");

  return hfta::tools::runTool(app, argc, argv, [&] {
    if (!report_json.empty()) {
      const auto dir = std::filesystem::path(report_json).parent_path();
      if (!dir.empty() && !std::filesystem::is_directory(dir)) {
        throw hfta::UserError(fmt::format("cannot write {}: folder {} does not exist",
                                          report_json, dir.string()));
      }
    }
    auto members = hfta::loadMembers(inputs);
    auto fused = hfta::fuse(members, {shared_input});
    hfta::saveModule(fused.module, output);
    if (!report_json.empty()) hfta::tools::writeTextFile(report_json, fused.report.json() + "\n");
    if (print_graph) std::cout << *fused.module.get_method("forward").graph();
    if (report) std::cout << fused.report.text();
    fmt::print("hfta-fuse: fused {} models into {} ({} fused nodes, {} fallback nodes)\n",
               inputs.size(), output, fused.report.fused.size(), fused.report.fallbacks.size());
    return 0;
  });
}
