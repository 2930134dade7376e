// Loading members and saving results, with the errors a user can cause
// turned into messages that say what to fix.
#include <fmt/format.h>

#include <filesystem>

#include "passes/hfta/hfta.h"
#include "runtime/atomic_file.h"

namespace hfta {
namespace {

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

std::vector<Member> loadMembers(const std::vector<std::string>& paths) {
  std::vector<Member> members;
  for (size_t b = 0; b < paths.size(); ++b) {
    const auto& path = paths[b];
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw UserError(fmt::format("model {} ({}): no such file. Check the path; models are the "
                                  ".pt files written by torch.jit.save.", b, path));
    }
    try {
      members.push_back({torch::jit::load(path, torch::kCPU), path});
    } catch (const c10::Error& e) {
      throw UserError(fmt::format(
          "model {} ({}) is not a TorchScript archive: {}. Save models with "
          "torch.jit.save(torch.jit.script(model), path).",
          b, path, firstLine(e.what_without_backtrace())));
    }
  }
  return members;
}

void saveModule(const torch::jit::Module& module, const std::string& path) {
  try {
    writeAtomically(path, [&](const std::string& tmp) { module.save(tmp); });
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
}

}  // namespace hfta
