#pragma once
// One torch.export graph (nodes of ATen operators, Python's symbolic-int
// arithmetic, higher-order operators with their subgraphs) emitted as
// TorchScript IR. The ATen operators keep their schemas: a node becomes the
// node TorchScript would have made for the same call, so the passes after
// loading see what they see for a scripted model.
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace hfta::exported {

// The exported graph's value names -> IR values.
using Environment = std::unordered_map<std::string, torch::jit::Value*>;

struct TranslationSite {
  std::string label;  // the member, for errors: "model 0 (m0.pt2)"
  // Device constants naming this device (the one the program was exported
  // on) become the device of `device_of` instead, so that the module runs
  // where its inputs are, as a scripted one does.
  std::optional<c10::Device> exported_device;
  torch::jit::Value* device_of = nullptr;
};

// Emits the nodes of `graph` (a serialized torch.export Graph) at the
// insertion point of `ir`, reading and extending `env`; returns the values
// of the graph's outputs. UserError naming the node, its source line and
// what to do for what cannot be translated.
std::vector<torch::jit::Value*> emitGraph(torch::jit::Graph& ir, const nlohmann::json& graph, Environment& env,
                                          const TranslationSite& site);

// The user's line that made an exported node ("File ..., line N" of its
// stack trace), as a source range the diagnostics print; empty if none.
torch::jit::SourceRange sourceRangeOf(const nlohmann::json& node);

// "`torch.ops.aten.add_.Tensor` at m.py:7: `x = self.bn(x)`", or the
// target and "(no source line recorded)": a node named in messages.
std::string describeNode(const nlohmann::json& node);

}  // namespace hfta::exported
