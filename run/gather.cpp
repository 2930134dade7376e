#include "run/gather.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>
#include <utility>

#include "hfta/hfta.h"
#include "support/error_summary.h"
#include "train/checkpoint.h"

namespace hfta::train {

GatheredCheckpoint gatherCheckpoints(const std::vector<MemberSource>& sources) {
  if (sources.empty()) throw UserError("no members to gather into an array");
  std::map<std::string, std::pair<torch::jit::Module, c10::IValue>> loaded;  // by folder
  std::vector<Member> members;
  std::vector<MemberOfState> picks;
  for (const auto& source : sources) {
    auto it = loaded.find(source.checkpoint);
    if (it == loaded.end()) {
      it = loaded
               .emplace(source.checkpoint,
                        std::make_pair(loadCheckpointModule(source.checkpoint), readCheckpointState(source.checkpoint)))
               .first;
    }
    const auto& [module, state] = it->second;
    if (source.member < 0 || source.member >= arraySize(module)) {
      throw UserError(fmt::format("the checkpoint {} has {} members, not a member {}", source.checkpoint,
                                  arraySize(module), source.member));
    }
    members.push_back({split(module, source.member), fmt::format("{} member {}", source.checkpoint, source.member)});
    picks.push_back({state, source.member});
  }
  const auto& first_dir = sources[0].checkpoint;
  try {
    auto state = gatherCheckpointStates(picks);
    FuseOptions options;
    options.shared_input = sharedInput(loaded.at(first_dir).first);
    options.allow_single_member = true;
    return {fuse(members, options).module, state};
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("cannot make one array of members of {} and others: {}", first_dir, e.what()));
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("cannot make one array of members of {} and others: {}", first_dir, errorSummary(e)));
  }
}

}  // namespace hfta::train
