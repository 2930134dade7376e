#pragma once
// What kind of file a model path holds, told from the records of its zip
// archive, so that a file hfta cannot load is named for what it is (a
// torch.save state_dict, a torch.export program, an AOTInductor package)
// rather than called a damaged TorchScript archive.
#include <string>

namespace hfta {

enum class ArchiveKind {
  TorchScript,         // torch.jit.save: code/, data.pkl, constants.pkl
  TorchSave,           // torch.save: data.pkl without code (a state_dict, a pickled module)
  ExportedProgram,     // torch.export.save (.pt2): archive_format "pt2", models/*.json
  AOTInductorPackage,  // torch._inductor.aoti_compile_and_package (.pt2): compiled code, no graph
  OtherZip,            // a zip archive of none of these
  NotAZip,             // not a whole zip archive: truncated, damaged, or another kind of file
};

ArchiveKind archiveKind(const std::string& path);

// "a torch.export program (.pt2)": for messages.
std::string describeArchiveKind(ArchiveKind kind);

}  // namespace hfta
