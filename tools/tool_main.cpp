#include "tools/tool_main.h"

#include <fmt/format.h>

#include <fstream>

#include "passes/hfta/hfta.h"
#include "runtime/atomic_file.h"

namespace hfta::tools {

int runTool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: error: {}. Run {} --help for usage.\n", app.get_name(), e.what(),
               app.get_name());
    return kExitUserError;
  }
  try {
    return body();
  } catch (const UserError& e) {
    fmt::print(stderr, "{}: error: {}\n", app.get_name(), e.what());
    return kExitUserError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error (please report it): {}\n", app.get_name(), e.what());
    return kExitInternalError;
  }
}

void writeTextFile(const std::string& path, const std::string& text) {
  try {
    writeAtomically(path, [&](const std::string& tmp) {
      std::ofstream out(tmp);
      out << text;
      if (!out) throw std::runtime_error("the write failed");
    });
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
}

}  // namespace hfta::tools
