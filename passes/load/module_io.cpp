// Loading members and saving results, with the errors a user can cause
// turned into messages that say what to fix.
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "passes/hfta/hfta.h"
#include "passes/ir/diagnostics.h"
#include "runtime/atomic_file.h"

namespace hfta {
namespace {

// Why `path` did not load as a TorchScript module, in the user's terms.
std::string whyNotLoadable(const std::string& path, const c10::Error& error) {
  std::vector<std::string> records;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    records = reader.getAllRecords();
  } catch (const c10::Error&) {
    return fmt::format(
        "is not a TorchScript archive (not a whole zip archive: truncated, damaged, or another kind "
        "of file): {}",
        errorSummary(error));
  }
  const bool has_code = std::any_of(records.begin(), records.end(),
                                    [](const std::string& r) { return r.find("code/") != std::string::npos; });
  const bool has_data = std::any_of(records.begin(), records.end(),
                                    [](const std::string& r) { return r.find("data.pkl") != std::string::npos; });
  if (!has_code && has_data) {
    return "holds an object saved with torch.save (a state_dict, or a module pickled from Python), not a "
           "TorchScript module";
  }
  return fmt::format("is a damaged TorchScript archive: {}", errorSummary(error));
}

}  // namespace

Member loadMember(const std::string& path, int64_t index) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UserError(
        fmt::format("model {} ({}): no such file. Check the path; models are the .pt files written by torch.jit.save.",
                    index, path));
  }
  try {
    return {torch::jit::load(path, torch::kCPU), path};
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("model {} ({}) {}. Save models with torch.jit.save(torch.jit.script(model), path).",
                                index, path, whyNotLoadable(path, e)));
  }
}

std::vector<Member> loadMembers(const std::vector<std::string>& paths) {
  std::vector<Member> members;
  for (size_t b = 0; b < paths.size(); ++b) members.push_back(loadMember(paths[b], static_cast<int64_t>(b)));
  return members;
}

void saveModule(const torch::jit::Module& module, const std::string& path) {
  try {
    writeAtomically(path, [&](std::ostream& out) { module.save(out); });
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
}

}  // namespace hfta
