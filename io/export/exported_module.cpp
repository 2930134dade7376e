#include "io/export/exported_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "io/export/forward_builder.h"
#include "io/export/module_tree.h"
#include "io/export/program_mode.h"
#include "io/module_mirror.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using torch::jit::Module;

// The programs serving train() and eval() (the same one when it serves
// both; null when none does).
struct ModePrograms {
  const Program* training = nullptr;
  const Program* evaluation = nullptr;
};

ModePrograms choosePrograms(const std::vector<Program>& programs, const std::string& label) {
  if (programs.size() == 1 && programs[0].name != "train" && programs[0].name != "eval") {
    const auto& only = programs[0];
    switch (recordedMode(only, label)) {
      case Mode::Training:
        return {&only, nullptr};
      case Mode::Evaluation:
        return {nullptr, &only};
      case Mode::Either:
        return {&only, &only};
    }
  }
  ModePrograms chosen;
  std::vector<std::string> names;
  for (const auto& p : programs) {
    names.push_back(p.name);
    const Mode wanted = p.name == "train" ? Mode::Training : Mode::Evaluation;
    if (p.name != "train" && p.name != "eval") continue;
    const Mode recorded = recordedMode(p, label);
    if (recorded != Mode::Either && recorded != wanted) {
      throw UserError(fmt::format("{}: program `{}` records {} mode. Export it after model.{}()", label, p.name,
                                  modeName(recorded), p.name));
    }
    (p.name == "train" ? chosen.training : chosen.evaluation) = &p;
  }
  if (!chosen.training && !chosen.evaluation) {
    throw UserError(
        fmt::format("{} holds the programs {}; hfta reads one program (torch.export.save) or the "
                    "programs `train` and `eval` (hfta.export)",
                    label, fmt::join(names, ", ")));
  }
  return chosen;
}

}  // namespace

Module moduleFromPrograms(const std::vector<Program>& programs, const std::string& label) {
  const auto chosen = choosePrograms(programs, label);
  // The programs for train() and eval(), in the order of prim::If's blocks.
  const std::array<const Program*, 2> by_mode{chosen.training, chosen.evaluation};
  const Program& first = chosen.training ? *chosen.training : *chosen.evaluation;

  Module module = moduleTree(first, by_mode[0] && by_mode[1] ? by_mode[1] : nullptr, label);
  addMethod(module, "forward", buildForward(module, by_mode, label));
  return module;
}

}  // namespace hfta::exported
