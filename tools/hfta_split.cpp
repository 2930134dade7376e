// hfta-split: member b of a fused module as a plain TorchScript module.
#include <fmt/format.h>

#include <filesystem>

#include "passes/hfta/hfta.h"
#include "tools/tool_main.h"

int main(int argc, char** argv) {
  CLI::App app{"Take members out of a module made by hfta-fuse, as plain .pt files.", "hfta-split"};
  std::string input, output;
  int64_t index = -1;
  bool all = false;
  app.add_option("fused", input, "the fused module (.pt) written by hfta-fuse")->required();
  auto* index_opt = app.add_option("--index", index, "the member to take out (0-based)");
  auto* all_opt = app.add_flag("--all", all, "take out every member into the folder given by -o");
  index_opt->excludes(all_opt);
  app.add_option("-o,--output", output, "the .pt to write (with --index) or a folder (with --all)")
      ->required();

  return hfta::tools::runTool(app, argc, argv, [&] {
    if (!all && index < 0) throw hfta::UserError("say which member to take out: --index B or --all");
    auto loaded = hfta::loadMembers({input});
    const auto& fused = loaded[0].module;
    const int64_t array_size = hfta::arraySize(fused);
    if (!all) {
      hfta::saveModule(hfta::split(fused, index), output);
      fmt::print("hfta-split: wrote member {} of {} to {}\n", index, array_size, output);
      return 0;
    }
    if (!std::filesystem::is_directory(output)) {
      throw hfta::UserError(fmt::format("--all writes into a folder, and {} is not one; create it first", output));
    }
    for (int64_t b = 0; b < array_size; ++b) {
      const auto path = (std::filesystem::path(output) / fmt::format("member_{}.pt", b)).string();
      hfta::saveModule(hfta::split(fused, b), path);
      fmt::print("hfta-split: wrote member {} of {} to {}\n", b, array_size, path);
    }
    return 0;
  });
}
