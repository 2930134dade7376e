#include "io/archive_kind.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <vector>

namespace hfta {
namespace {

// PyTorchStreamReader strips the archive's top folder: a record is
// "models/model.json", "data/aotinductor/...", "code/__torch__.py".
bool anyRecord(const std::vector<std::string>& records, const std::string& prefix) {
  return std::any_of(records.begin(), records.end(), [&](const std::string& r) { return r.rfind(prefix, 0) == 0; });
}

bool hasRecord(const std::vector<std::string>& records, const std::string& name) {
  return std::find(records.begin(), records.end(), name) != records.end();
}

}  // namespace

ArchiveKind archiveKind(const std::string& path) {
  std::vector<std::string> records;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    records = reader.getAllRecords();
  } catch (const c10::Error&) {
    return ArchiveKind::NotAZip;
  }
  if (anyRecord(records, "data/aotinductor/")) return ArchiveKind::AOTInductorPackage;
  if (hasRecord(records, "archive_format") && anyRecord(records, "models/")) return ArchiveKind::ExportedProgram;
  if (anyRecord(records, "code/")) return ArchiveKind::TorchScript;
  if (hasRecord(records, "data.pkl")) return ArchiveKind::TorchSave;
  return ArchiveKind::OtherZip;
}

std::string describeArchiveKind(ArchiveKind kind) {
  switch (kind) {
    case ArchiveKind::TorchScript:
      return "a TorchScript archive (torch.jit.save)";
    case ArchiveKind::TorchSave:
      return "an object saved with torch.save (a state_dict, or a module pickled from Python)";
    case ArchiveKind::ExportedProgram:
      return "a torch.export program (.pt2, torch.export.save)";
    case ArchiveKind::AOTInductorPackage:
      return "an AOTInductor package (.pt2 of compiled code: it holds no graph to fuse)";
    case ArchiveKind::OtherZip:
      return "a zip archive that PyTorch did not write as a model";
    case ArchiveKind::NotAZip:
      return "not a whole zip archive (truncated, damaged, or another kind of file)";
  }
  return "";
}

}  // namespace hfta
