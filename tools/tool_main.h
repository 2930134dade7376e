#pragma once
// What every hfta command shares: exit codes and how errors are printed.
//   0: success   1: internal error (a bug: please report it)   2: user error
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace hfta::tools {

constexpr int kExitUserError = 2;
constexpr int kExitInternalError = 1;

// Parses the command line and runs `body`, mapping CLI11 errors and
// hfta::UserError to exit code 2 with one paragraph on stderr.
int runTool(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Writes text through a temporary file and a rename; UserError on failure.
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace hfta::tools
