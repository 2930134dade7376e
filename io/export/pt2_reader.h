#pragma once
// The programs of a torch.export archive (.pt2), read without Python: the
// zip's models/<name>.json (torch.export's serialization schema) and the
// weights and constants each program names, as tensors.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace hfta::exported {

// The schema version this reader was written against (torch 2.11.0 writes
// 8.17). A different major version changed the format incompatibly.
constexpr int kSchemaMajor = 8;
constexpr int kSchemaMinor = 17;

struct Program {
  std::string name;                             // "model" (torch.export.save), "train", "eval"
  nlohmann::json exported;                      // models/<name>.json: graph_module, schema_version, ...
  std::map<std::string, at::Tensor> weights;    // by qualified name (parameters and buffers)
  std::map<std::string, at::Tensor> constants;  // by tensor_constant name
};

inline const nlohmann::json& graphModule(const Program& p) { return p.exported.at("graph_module"); }
inline const nlohmann::json& signature(const Program& p) { return graphModule(p).at("signature"); }

// Calls `visit` on each node of a serialized graph and of the subgraphs
// its higher-order operators take (cond's branches, a loop's body).
void forEachNode(const nlohmann::json& graph, const std::function<void(const nlohmann::json& node)>& visit);

// Every program of the archive, in the order of the records; `label` names
// the member in errors ("model 0 (m0.pt2)"). UserError if the archive does
// not read, holds no program, or was written by another schema major version.
std::vector<Program> readPrograms(const std::string& path, const std::string& label);
std::vector<Program> readPrograms(std::istream& in, const std::string& label);

}  // namespace hfta::exported
