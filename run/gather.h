#pragma once
// An array made of members of several checkpoints: what an array that sheds
// members, or merges the members of several, goes on from (hfta-tune's
// survivors).
#include <torch/script.h>

#include <string>
#include <vector>

namespace hfta::train {

// Member `member` of the checkpoint in the folder `checkpoint`.
struct MemberSource {
  std::string checkpoint;
  int64_t member = 0;
};
// A checkpoint of a new array whose member b is sources[b] as its
// checkpoint left it (parameters, buffers, optimizer and schedule state,
// loss scale, progress and metrics, renumbered). The module is fused anew
// from the members split out. UserError unless the sources are checkpoints
// of one model, trained the same way, stopped after the same epoch.
struct GatheredCheckpoint {
  torch::jit::Module module;
  c10::IValue state;
};
GatheredCheckpoint gatherCheckpoints(const std::vector<MemberSource>& sources);

}  // namespace hfta::train
