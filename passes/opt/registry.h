#pragma once
// The passes hfta-opt runs by name, chained as mlir-opt chains them
// (`--pass verify-lockstep --pass fuse`): each works on what the one before
// it left. One table, so that a pass is one entry.
#include <torch/script.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/verify/lockstep.h"

namespace hfta {

// What a chain of passes works on: a module (read from a .pt), or graphs
// (IR text, one per member; or what a pass made of the module).
struct PassState {
  std::optional<torch::jit::Module> module;
  std::vector<MemberGraph> graphs;
  std::vector<size_t> shared_inputs;  // `fuse`: the tensor inputs all members share
  std::vector<std::string> reports;   // what the passes had to say, in order
};

struct RegisteredPass {
  std::string name;
  std::string summary;  // for hfta-opt --help
  // UserError if the state is not what the pass takes.
  std::function<void(PassState&)> run;
};

const std::vector<RegisteredPass>& registeredPasses();
// UserError naming the known passes if there is no pass `name`.
const RegisteredPass& findPass(const std::string& name);

// IR text as a graph; UserError naming `source` if the text does not parse,
// or parses into a graph that is not well formed (what torch's lint checks:
// every value defined before its uses, blocks and outputs consistent).
std::shared_ptr<torch::jit::Graph> parseGraph(const std::string& text, const std::string& source);

// The IR a chain leaves: its one graph, or the module's forward.
std::shared_ptr<torch::jit::Graph> resultGraph(const PassState& state);

}  // namespace hfta
