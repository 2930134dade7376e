// Loading members and saving results, with the errors a user can cause
// turned into messages that say what to fix.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "passes/hfta/hfta.h"

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
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw UserError(fmt::format("cannot write {}: folder {} does not exist", path, dir.string()));
  }
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    throw UserError(fmt::format("cannot write {}: {} (choose a writable output path)", path,
                                std::strerror(errno)));
  }
  close(fd);
  try {
    module.save(tmp);
  } catch (const c10::Error& e) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("cannot write {}: {}", path, firstLine(e.what_without_backtrace())));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

}  // namespace hfta
