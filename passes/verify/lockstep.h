#pragma once
// Lockstep matching: B member graphs (and modules) must be the same program
// with the same configuration before they can be fused. Every mismatch is a
// UserError naming the member, the node with its source line, and what
// differs.
#include <torch/script.h>

#include <string>
#include <vector>

namespace hfta {

struct MemberGraph {
  std::shared_ptr<torch::jit::Graph> graph;
  std::string name;  // e.g. "model 1 (m1.pt)"
};

// Node kinds and schemas, dataflow, constants and node attributes, output
// types (modulo class-name mangling) and nested blocks.
void verifyGraphsInLockstep(const std::vector<MemberGraph>& members);

// Parameters, buffers and other attributes of the module hierarchies: the
// same qualified names, tensor shapes and dtypes, non-tensor values.
void verifyModulesInLockstep(const std::vector<torch::jit::Module>& modules, const std::vector<std::string>& names);

}  // namespace hfta
