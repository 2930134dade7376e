// hfta-fuse: B TorchScript models of one topology -> one fused module.
#include <fmt/format.h>

#include <iostream>

#include "hfta/hfta.h"
#include "runtime/library_path.h"
#include "runtime/ops/segment_plan.h"
#include "support/atomic_file.h"
#include "tools/tool_main.h"

namespace {

// The plans measured for this graph so far (forms.json): per input
// signature, each segment's plan and the median step time of every trial.
std::string measuredPlans(const hfta::FusionReport& report) {
  if (report.segments.empty()) return "";
  const auto decisions = hfta::segment_plan::decisions(report.plan_graph);
  if (decisions.empty()) {
    return "plans: none measured on this machine yet (the first call times them; F fused, M members)\n";
  }
  std::string out =
      "plans measured (F fused, M members; median step time of each mix, timed in pairs: the best so far against "
      "its challenger):\n";
  for (const auto& d : decisions) {
    std::string trials;
    for (size_t i = 0; i < d.trials.size(); ++i) {
      const auto& [plans, seconds] = d.trials[i];
      trials += fmt::format("{}{} {:.3f} ms", i == 0 ? "" : i % 2 ? " against " : "; ", plans, seconds * 1e3);
    }
    out += fmt::format("  {}  {}  ({})\n", d.plans, d.signature, trials);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Fuse B TorchScript models of the same topology into one module that trains "
      "them all at once.",
      "hfta-fuse"};
  std::vector<std::string> inputs;
  std::string output, report_json;
  bool shared_input = false, report = false, print_graph = false, no_segment_plans = false;
  app.add_option("models", inputs, "the members: .pt files from torch.jit.save")->required();
  app.add_option("-o,--output", output, "where to write the fused module (.pt)")->required();
  app.add_flag("--shared-input", shared_input, "all members see one shared input (forward takes it unstacked)");
  app.add_flag("--no-segment-plans", no_segment_plans,
               "run the fused ops everywhere (by default the first call measures, for each segment of the "
               "graph, whether its fused ops or the members' own ops run faster)");
  app.add_flag("--report", report,
               "print what was fused and what fell back, and why, and the segments' plans measured on this "
               "machine so far");
  app.add_option("--report-json", report_json, "write the fusion report as JSON to this file");
  app.add_flag("--print-graph", print_graph, "print the fused forward graph");
  app.add_flag_callback(
      "--print-library",
      [] {
        fmt::print("{}\n", hfta::runtimeLibraryPath());
        throw CLI::Success();
      },
      "print the path of the hfta runtime library (for torch.ops.load_library in Python) and exit");

  return hfta::tools::runTool(app, argc, argv, [&] {
    hfta::tools::checkInputs(inputs, "model");
    hfta::tools::checkNotAnInput(output, inputs, "-o");
    if (!report_json.empty()) {
      hfta::tools::checkNotAnInput(report_json, inputs, "--report-json");
      if (report_json == output) throw hfta::UserError("-o and --report-json name the same file");
    }
    hfta::FuseOptions options;
    options.shared_input = shared_input;
    options.segment_plans = !no_segment_plans;
    const auto fused = hfta::fuseFiles(inputs, options);
    // The module and its report, both or neither.
    try {
      hfta::AtomicFiles files;
      files.add(output, [&](std::ostream& out) { fused.module.save(out); });
      if (!report_json.empty()) {
        files.add(report_json, [&](std::ostream& out) { out << fused.report.json() << "\n"; });
      }
      files.commit();
    } catch (const hfta::FileWriteError& e) {
      throw hfta::UserError(fmt::format("{}; nothing was written", e.what()));
    }
    if (print_graph) std::cout << *fused.module.get_method("forward").graph();
    if (report) std::cout << fused.report.text() << measuredPlans(fused.report);
    fmt::print("hfta-fuse: fused {} models into {} ({} fused nodes, {} fallback nodes)\n", inputs.size(), output,
               fused.report.fused.size(), fused.report.fallbacks.size());
    return 0;
  });
}
