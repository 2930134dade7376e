#pragma once
// hfta's module files: load members (checked, with messages that name the
// file and the member), save a module without leaving a partial file, read
// the record a fused module keeps (its array size, its input) and split a
// member back out. What the training side needs of hfta, without the
// compiler; hfta/hfta.h includes it.
#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/user_error.h"

namespace hfta {

struct Member {
  torch::jit::Module module;
  std::string source;  // where it came from (a path), for diagnostics and the record
};

// Loads each path as a TorchScript module (on the CPU): a TorchScript
// archive, or a torch.export archive (.pt2) translated into one (see
// io/export/exported_module.h for the programs it reads). UserError if a
// file is missing or is neither.
std::vector<Member> loadMembers(const std::vector<std::string>& paths);
// One of them: the member `index` of an array (for messages).
Member loadMember(const std::string& path, int64_t index);

// Whether `module` was made by hfta::fuse (or hfta-fuse).
bool isFused(const torch::jit::Module& module);
// A member from the bytes of a torch.export archive: what hfta.fuse reads
// for an ExportedProgram given in Python. `source` names it.
Member loadExportedMember(const std::string& archive, const std::string& source, int64_t index);

// Number of members of a fused module; UserError if it is not one.
int64_t arraySize(const torch::jit::Module& fused);
// Whether a fused module's forward takes one shared, unstacked input.
bool sharedInput(const torch::jit::Module& fused);

// Member `index` of a fused module as a plain module with that member's
// current weights; it needs nothing from hfta to load or run.
torch::jit::Module split(const torch::jit::Module& fused, int64_t index);

// Saves through a temporary file in the same folder and renames it, so a
// failed save leaves no partial file. UserError if it cannot be written.
void saveModule(const torch::jit::Module& module, const std::string& path);

}  // namespace hfta
