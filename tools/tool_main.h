#pragma once
// What every hfta command shares: exit codes and how errors are printed.
//   0: success   1: internal error (a bug: please report it)   2: user error
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace hfta::tools {

constexpr int kExitUserError = 2;
constexpr int kExitInternalError = 1;

// Parses the command line and runs `body`, mapping CLI11 errors and
// hfta::UserError to exit code 2 with one paragraph on stderr.
int runTool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// The files a command reads, checked before it reads or writes anything:
// UserError for a shell pattern that matched no file (the shell passes it
// on as it is), a missing file, or one file given twice. `what` names the
// inputs in messages ("model" -> "model 1 (b.pt)").
void checkInputs(const std::vector<std::string>& inputs, const std::string& what);
// UserError if `output` is one of the inputs (the same file, by any name).
void checkNotAnInput(const std::string& output, const std::vector<std::string>& inputs, const std::string& flag);

// A setting's command-line flag: "step_size" -> "--step-size".
std::string flagOf(std::string setting);

// The command line with each `--config FILE` (a JSON object of settings by
// flag name without the dashes, e.g. {"optimizer": "adam", "lr": [0.01,
// 0.03], "epochs": 5, "own_streams": true}) replaced by those flags, in
// place, so that flags after it win. UserError if the file cannot be read
// or is not one JSON object.
std::vector<std::string> expandConfigFiles(int argc, char** argv);

}  // namespace hfta::tools
