#pragma once
// hfta's C++ API: fuse B TorchScript modules of one topology into one module
// that trains them all at once, and split any member back out.
//
//   std::vector<hfta::Member> members = hfta::loadMembers({"m0.pt", "m1.pt"});
//   hfta::FusionResult fused = hfta::fuse(members, {.shared_input = true});
//   hfta::saveModule(fused.module, "fused.pt");
//   torch::jit::Module best = hfta::split(fused.module, 1);
#include <torch/script.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace hfta {

// An error the user can fix (bad file, incompatible models, bad option). Its
// message names what to fix; tools exit with code 2 on it.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Member {
  torch::jit::Module module;
  std::string source;  // where it came from (a path), for diagnostics and the record
};

struct FuseOptions {
  // All members see one shared, unstacked input (the usual sweep): forward
  // takes the member-shaped input instead of [B, ...], and the first layers
  // read it without copying it B times.
  bool shared_input = false;
  // An array of one member (a baseline run trained the same way as a
  // sweep); hfta-fuse refuses it as a likely mistake.
  bool allow_single_member = false;
};

// What the fusion did with each node of the member graph.
struct FusionReport {
  struct Entry {
    std::string node;    // the node's kind, e.g. aten::linear
    std::string source;  // the user's source line, "file:line", or ""
    std::string detail;  // the rule family (fused) or why it fell back
  };
  int64_t array_size = 0;
  int64_t uniform_nodes = 0;  // nodes identical in every member, kept as they are
  // Conversions between the member-leading layout ([B, N, C, ...]) and the
  // channel-folded one ([N, B*C, ...], which grouped convolutions and batch
  // norm read) left in the fused graph: the fewer, the fewer copies.
  int64_t layout_conversions = 0;
  std::vector<Entry> fused;
  std::vector<Entry> fallbacks;  // run once per member: correct, but not fused

  std::string text() const;
  std::string json() const;
};

struct FusionResult {
  torch::jit::Module module;
  FusionReport report;
};

// Loads each path as a TorchScript module (on the CPU); UserError if a file
// is missing or is not a TorchScript archive.
std::vector<Member> loadMembers(const std::vector<std::string>& paths);
// One of them: the member `index` of an array (for messages).
Member loadMember(const std::string& path, int64_t index);

// Verifies that the members match in lockstep and builds the fused module:
// every parameter and buffer keeps its name and is stacked ([B, ...]);
// forward takes and returns [B, N, ...] (or one shared, unstacked input);
// the module records B and its sources (README.md, "The fused module").
// UserError on mismatch.
FusionResult fuse(const std::vector<Member>& members, const FuseOptions& options = {});

// hfta::fuse of the models in `paths`, loaded a few at a time (one per
// core) and released once their tensors are in the fused module's, so that
// memory holds about one copy of the members' data however many there
// are. What hfta-fuse runs.
FusionResult fuseFiles(const std::vector<std::string>& paths, const FuseOptions& options = {});

// Member `index` of a fused module as a plain module with that member's
// current weights; it needs nothing from hfta to load or run.
torch::jit::Module split(const torch::jit::Module& fused, int64_t index);

// Whether `module` was made by hfta::fuse (or hfta-fuse).
bool isFused(const torch::jit::Module& module);
// Number of members of a fused module; UserError if it is not one.
int64_t arraySize(const torch::jit::Module& fused);
// Whether a fused module's forward takes one shared, unstacked input.
bool sharedInput(const torch::jit::Module& fused);

// Saves through a temporary file in the same folder and renames it, so a
// failed save leaves no partial file. UserError if it cannot be written.
void saveModule(const torch::jit::Module& module, const std::string& path);

}  // namespace hfta
