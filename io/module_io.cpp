// Loading members and saving results, with the errors a user can cause
// turned into messages that say what to fix.
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "hfta/io.h"
#include "io/archive_check.h"
#include "io/archive_kind.h"
#include "io/export/exported_module.h"
#include "support/atomic_file.h"
#include "support/error_summary.h"

namespace hfta {
namespace {

// Why `path` did not load as a TorchScript module, in the user's terms:
// what the file is, if not a TorchScript archive.
std::string whyNotLoadable(const std::string& path, const std::exception& error) {
  const auto kind = archiveKind(path);
  if (kind == ArchiveKind::TorchScript) return fmt::format("is a damaged TorchScript archive: {}", errorSummary(error));
  return fmt::format("is not a model hfta reads: it is {}", describeArchiveKind(kind));
}

constexpr const char* kFormatsRead =
    "hfta reads TorchScript modules (torch.jit.save(torch.jit.script(model), path)) and torch.export programs "
    "(torch.export.save, or hfta.export for both modes)";

// A member given as torch.export programs, read from `archive` (a path or
// a stream), as a TorchScript module.
template <typename Archive>
Member exportedMember(Archive& archive, const std::string& source, int64_t index) {
  const auto label = fmt::format("model {} ({})", index, source);
  try {
    return {exported::moduleFromPrograms(exported::readPrograms(archive, label), label), source};
  } catch (const nlohmann::json::exception& e) {
    throw UserError(
        fmt::format("{} is a damaged torch.export archive: its program does not read ({}). Save it "
                    "again with torch.export.save",
                    label, e.what()));
  }
}

// The bytes a tensor's view reaches in its storage.
int64_t bytesReached(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * std::abs(t.stride(d));
  return (last + 1) * static_cast<int64_t>(t.element_size());
}

// LibTorch loads a tensor whose record in the archive was cut short with a
// storage of the size the archive's pickle declares, on a buffer of the
// size the record has: reading it reads past the buffer's end. Checked
// here: the storages of every tensor attribute and tensor constant may not
// declare more bytes than the archive's tensor records hold, and no tensor
// may reach past its storage.
void checkTensorsWhole(const torch::jit::Module& module, int64_t index, const std::string& path) {
  auto damaged = [&](const std::string& what) {
    return UserError(
        fmt::format("model {} ({}) is a damaged TorchScript archive: {}. Save the model again with "
                    "torch.jit.save",
                    index, path, what));
  };
  std::set<const c10::StorageImpl*> storages;
  int64_t declared = 0;
  auto check = [&](const at::Tensor& t, const std::string& what) {
    if (!t.defined() || !t.has_storage()) return;
    const auto held = static_cast<int64_t>(t.storage().nbytes());
    if (bytesReached(t) > held) throw damaged(fmt::format("{} reaches past its data", what));
    if (storages.insert(t.storage().unsafeGetStorageImpl()).second) declared += held;
  };
  for (const auto& named : module.named_attributes(/*recurse=*/true)) {
    if (named.value.isTensor()) check(named.value.toTensor(), fmt::format("tensor `{}`", named.name));
  }
  for (const auto& named : module.named_modules()) {
    for (const auto& method : named.value.get_methods()) {
      auto graph = method.graph();
      torch::jit::DepthFirstGraphNodeIterator nodes(graph);
      while (const torch::jit::Node* node = nodes.next()) {
        if (node->kind() != c10::prim::Constant || !node->output()->type()->cast<c10::TensorType>()) continue;
        check(node->t(c10::attr::value), fmt::format("a tensor constant of {}", method.name()));
      }
    }
  }
  int64_t held = 0;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& name : reader.getAllRecords()) {
      if (name.rfind("data/", 0) == 0 || name.rfind("constants/", 0) == 0) {
        held += static_cast<int64_t>(reader.getRecordSize(name));
      }
    }
  } catch (const c10::Error& e) {  // TorchScript read it; the zip's own reader does not
    throw damaged(errorSummary(e));
  }
  if (declared > held) {
    throw damaged(
        fmt::format("its tensors need {} bytes of data and its tensor records hold {} (cut short)", declared, held));
  }
}

}  // namespace

Member loadMember(const std::string& path, int64_t index) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UserError(
        fmt::format("model {} ({}): no such file. Check the path; models are the .pt files written by torch.jit.save "
                    "or the .pt2 files of torch.export.save.",
                    index, path));
  }
  if (archiveKind(path) == ArchiveKind::ExportedProgram) return exportedMember(path, path, index);
  checkArchivePickles(path, index);
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception&) {
    // Not read here: the compiler's ErrorReport reads the debug information
    // in what(), which cannot throw, and that may be what is damaged. The
    // message comes from loading again without it.
    try {
      torch::jit::load(path, torch::kCPU, /*load_debug_files=*/false);
    } catch (const std::exception& e) {
      throw UserError(fmt::format("model {} ({}) {}. {}.", index, path, whyNotLoadable(path, e), kFormatsRead));
    }
    throw UserError(
        fmt::format("model {} ({}) is a damaged TorchScript archive: its debug information does not "
                    "read. Save the model again with torch.jit.save",
                    index, path));
  }
  checkTensorsWhole(module, index, path);
  return {module, path};
}

Member loadExportedMember(const std::string& archive, const std::string& source, int64_t index) {
  std::istringstream in(archive);
  return exportedMember(in, source, index);
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
