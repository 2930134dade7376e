#include "tools/tool_main.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "passes/hfta/hfta.h"

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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) {
      std::remove(tmp.c_str());
      throw UserError(fmt::format("cannot write {}: choose a writable path", path));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

}  // namespace hfta::tools
