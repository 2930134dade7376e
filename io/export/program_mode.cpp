#include "io/export/program_mode.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "io/export/graph_translation.h"
#include "support/strings.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using nlohmann::json;

// Operators with a flag that is the mode, and the flag's argument name.
const std::map<std::string, std::string>& modeFlags() {
  static const std::map<std::string, std::string> flags = {
      {"torch.ops.aten.dropout.default", "train"},
      {"torch.ops.aten.dropout_.default", "train"},
      {"torch.ops.aten.feature_dropout.default", "train"},
      {"torch.ops.aten.alpha_dropout.default", "train"},
      {"torch.ops.aten.feature_alpha_dropout.default", "train"},
      {"torch.ops.aten.native_dropout.default", "train"},
      {"torch.ops.aten.rrelu.default", "training"},
  };
  return flags;
}

const json* input(const json& node, const std::string& name) {
  for (const auto& in : node.at("inputs")) {
    if (in.at("name") == name) return &in.at("arg");
  }
  return nullptr;
}

struct Evidence {
  std::optional<std::string> training, evaluation;  // a node recording each
};

// Batch norm's num_batches_tracked is counted only in training.
bool countsBatches(const json& node, const std::map<std::string, std::string>& buffers) {
  if (node.at("target") != "torch.ops.aten.add_.Tensor" && node.at("target") != "torch.ops.aten.add_.Scalar") {
    return false;
  }
  const json* self = input(node, "self");
  if (!self || !self->contains("as_tensor")) return false;
  const auto it = buffers.find(self->at("as_tensor").at("name").get<std::string>());
  return it != buffers.end() && endsWith(it->second, "num_batches_tracked");
}

void collect(const json& graph, const std::map<std::string, std::string>& buffers, Evidence& evidence) {
  forEachNode(graph, [&](const json& node) {
    const auto target = node.at("target").get<std::string>();
    std::optional<bool> training;
    if (const auto flag = modeFlags().find(target); flag != modeFlags().end()) {
      const json* arg = input(node, flag->second);
      if (arg && arg->contains("as_bool")) training = arg->at("as_bool").get<bool>();
    } else if (target == "torch.ops.aten.batch_norm.default") {
      // With running statistics, `training` is the mode; without them
      // batch norm uses the batch's statistics in both modes.
      const json* mean = input(node, "running_mean");
      const json* flag = input(node, "training");
      if (mean && mean->contains("as_tensor") && flag && flag->contains("as_bool")) training = flag->at("as_bool");
    } else if (countsBatches(node, buffers)) {
      training = true;
    }
    if (!training) return;
    auto& slot = *training ? evidence.training : evidence.evaluation;
    if (!slot) slot = describeNode(node);
  });
}

}  // namespace

Mode recordedMode(const Program& program, const std::string& label) {
  std::map<std::string, std::string> buffers;  // placeholder -> buffer name
  for (const auto& spec : signature(program).at("input_specs")) {
    if (spec.contains("buffer")) {
      buffers[spec.at("buffer").at("arg").at("name")] = spec.at("buffer").at("buffer_name").get<std::string>();
    }
  }
  Evidence evidence;
  collect(graphModule(program).at("graph"), buffers, evidence);
  if (evidence.training && evidence.evaluation) {
    throw UserError(fmt::format(
        "{}: program `{}` records both modes: {} runs as in training and {} as in evaluation. Export the model "
        "after model.train() for training and model.eval() for evaluation (hfta.export records both)",
        label, program.name, *evidence.training, *evidence.evaluation));
  }
  if (evidence.training) return Mode::Training;
  if (evidence.evaluation) return Mode::Evaluation;
  return Mode::Either;
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::Training:
      return "training";
    case Mode::Evaluation:
      return "evaluation";
    case Mode::Either:
      return "either";
  }
  return "";
}

}  // namespace hfta::exported
