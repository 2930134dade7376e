#pragma once
// How diagnostics name a node: its kind and the user's source line.
#include <torch/csrc/jit/ir/ir.h>

#include <string>

namespace hfta {

// "file.py:23" of the user's code that produced `node`, or "" if unknown.
std::string sourceLine(const torch::jit::Node* node);
// "aten::linear (file.py:23: `return self.fc(x)`)": for messages.
std::string describeNode(const torch::jit::Node* node);

}  // namespace hfta
