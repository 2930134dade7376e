#include "tools/tool_main.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>

#include "support/atomic_file.h"
#include "support/user_error.h"

namespace hfta::tools {

int runTool(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // a flag that did its job while parsing (--print-library)
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: error: {}. Run {} --help for usage.\n", app.get_name(), e.what(), app.get_name());
    return kExitUserError;
  }
  removeTemporaryFilesOnSignal();
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

namespace {

// The file's identity (device and inode), or nothing if it does not exist.
std::optional<std::pair<dev_t, ino_t>> fileIdentity(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return std::make_pair(info.st_dev, info.st_ino);
}

}  // namespace

void checkInputs(const std::vector<std::string>& inputs, const std::string& what) {
  std::map<std::pair<dev_t, ino_t>, size_t> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& path = inputs[i];
    const auto identity = fileIdentity(path);
    if (!identity) {
      if (path.find_first_of("*?[") != std::string::npos) {
        throw UserError(
            fmt::format("{} {} ({}): no file matches this pattern (the shell passed it on as it was). "
                        "Check the folder and the pattern",
                        what, i, path));
      }
      throw UserError(fmt::format("{} {} ({}): no such file. Check the path", what, i, path));
    }
    const auto [first, fresh] = seen.emplace(*identity, i);
    if (!fresh) {
      throw UserError(fmt::format("{} {} ({}) is the same file as {} {} ({}): give each file once", what, i, path, what,
                                  first->second, inputs[first->second]));
    }
  }
}

void checkNotAnInput(const std::string& output, const std::vector<std::string>& inputs, const std::string& flag) {
  const auto out = fileIdentity(output);
  if (!out) return;
  for (const auto& input : inputs) {
    if (fileIdentity(input) == out) {
      throw UserError(
          fmt::format("{} {} is an input of this command ({}): writing it would destroy what is read. "
                      "Choose another output",
                      flag, output, input));
    }
  }
}

std::string flagOf(std::string setting) {
  std::replace(setting.begin(), setting.end(), '_', '-');
  return "--" + setting;
}

std::vector<std::string> expandConfigFiles(int argc, char** argv) {
  std::vector<std::string> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--config") {
      args.push_back(arg);
      continue;
    }
    if (i + 1 >= argc) throw UserError("--config needs a JSON file");
    const std::string path = argv[++i];
    std::ifstream in(path);
    if (!in) throw UserError(fmt::format("--config: cannot read {}", path));
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("--config: {} is not JSON: {}", path, e.what()));
    }
    if (!config.is_object()) throw UserError(fmt::format("--config: {} must hold one JSON object", path));
    for (const auto& [key, value] : config.items()) {
      const std::string flag = flagOf(key);
      if (value.is_boolean()) {
        if (value.get<bool>()) args.push_back(flag);
        continue;
      }
      std::string text;
      const auto items = value.is_array() ? value : nlohmann::json::array({value});
      for (const auto& item : items) {
        if (!text.empty()) text += ",";
        text += item.is_string() ? item.get<std::string>() : item.dump();
      }
      args.push_back(flag);
      args.push_back(text);
    }
  }
  return args;
}

}  // namespace hfta::tools
