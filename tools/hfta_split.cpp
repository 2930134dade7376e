// hfta-split: member b of a fused module as a plain TorchScript module.
#include <fmt/format.h>

#include <filesystem>

#include "hfta/io.h"
#include "support/atomic_file.h"
#include "tools/tool_main.h"

int main(int argc, char** argv) {
  CLI::App app{"Take members out of a module made by hfta-fuse, as plain .pt files.", "hfta-split"};
  std::string input, output;
  int64_t index = 0;
  bool all = false;
  app.add_option("fused", input, "the fused module (.pt) written by hfta-fuse")->required();
  auto* index_opt = app.add_option("--index", index, "the member to take out (0-based)");
  auto* all_opt = app.add_flag("--all", all, "take out every member into the folder given by -o");
  index_opt->excludes(all_opt);
  app.add_option("-o,--output", output, "the .pt to write (with --index) or a folder (with --all)")->required();

  return hfta::tools::runTool(app, argc, argv, [&] {
    if (!all && index_opt->count() == 0) throw hfta::UserError("say which member to take out: --index B or --all");
    if (!all && index < 0) throw hfta::UserError(fmt::format("--index {} is negative: members count from 0", index));
    hfta::tools::checkInputs({input}, "fused module");
    if (all && !std::filesystem::is_directory(output)) {
      throw hfta::UserError(fmt::format("--all writes into a folder, and {} is not one; create it first", output));
    }
    auto loaded = hfta::loadMembers({input});
    const auto& fused = loaded[0].module;
    const int64_t array_size = hfta::arraySize(fused);
    std::vector<int64_t> members;
    std::vector<std::string> paths;
    if (all) {
      for (int64_t b = 0; b < array_size; ++b) {
        members.push_back(b);
        paths.push_back((std::filesystem::path(output) / fmt::format("member_{}.pt", b)).string());
      }
    } else {
      members.push_back(index);
      paths.push_back(output);
    }
    for (const auto& path : paths) hfta::tools::checkNotAnInput(path, {input}, "-o");
    // Every member or none.
    try {
      hfta::AtomicFiles files;
      for (size_t i = 0; i < members.size(); ++i) {
        const auto member = hfta::split(fused, members[i]);
        files.add(paths[i], [&](std::ostream& out) { member.save(out); });
      }
      files.commit();
    } catch (const hfta::FileWriteError& e) {
      throw hfta::UserError(fmt::format("{}; nothing was written", e.what()));
    }
    for (size_t i = 0; i < members.size(); ++i) {
      fmt::print("hfta-split: wrote member {} of {} to {}\n", members[i], array_size, paths[i]);
    }
    return 0;
  });
}
