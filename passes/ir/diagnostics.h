#pragma once
// How diagnostics name a node: its kind and the user's source line.
#include <torch/csrc/jit/ir/ir.h>

#include <string>

namespace hfta {

// "file.py:23" of the user's code that produced `node`, or "" if unknown.
std::string sourceLine(const torch::jit::Node* node);
// "aten::linear (file.py:23: `return self.fc(x)`)": for messages.
std::string describeNode(const torch::jit::Node* node);
// A qualified name with TorchScript's per-compilation mangling
// ("___torch_mangle_7.") removed, so equal classes compare equal.
std::string withoutMangling(const std::string& name);
std::string demangledTypeName(const c10::TypePtr& type);

// The line of a LibTorch error that says what went wrong: its first line
// (without c10::Error's backtrace), or, for an error raised inside
// TorchScript code ("The following operation failed in the TorchScript
// interpreter." and two tracebacks), its last.
std::string errorSummary(const std::exception& error);

}  // namespace hfta
