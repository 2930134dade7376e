#include "support/measurement_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/atomic_file.h"

namespace hfta {

std::string cacheFile(const std::string& name) {
  namespace fs = std::filesystem;
  if (const char* own = std::getenv("HFTA_CACHE_DIR")) return (fs::path(own) / name).string();
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return (fs::path(xdg) / "hfta" / name).string();
  if (const char* home = std::getenv("HOME")) return (fs::path(home) / ".cache" / "hfta" / name).string();
  return "";
}

nlohmann::json readCacheFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  auto cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : nlohmann::json::object();
}

void updateCacheFile(const std::string& path, const std::string& key, const nlohmann::json& value) {
  auto cache = readCacheFile(path);
  cache[key] = value;
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    writeFileAtomically(path, cache.dump(1) + "\n");
  } catch (const std::exception&) {
    // Left as it was.
  }
}

const std::string& processorModel() {
  static const std::string model = [] {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return std::string("unknown processor");
  }();
  return model;
}

}  // namespace hfta
