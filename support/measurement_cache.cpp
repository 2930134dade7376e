#include "support/measurement_cache.h"

#include <fmt/core.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

namespace {

// An exclusive lock on `path`.lock while it lives, where one can be taken:
// processes that measure at once (hfta-tune's workers, ranks, test runs)
// would otherwise each re-read the cache, add their own entry and rename
// over the other's, and the entry lost would be measured again by a later
// process, which may then choose differently from the first.
class CacheLock {
 public:
  explicit CacheLock(const std::string& path)
      : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // (closing releases the lock)
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_;
};

}  // namespace

void updateCacheFile(const std::string& path, const std::string& key, const nlohmann::json& value) {
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    const CacheLock lock(path);
    auto cache = readCacheFile(path);
    cache[key] = value;
    writeFileAtomically(path, cache.dump(1) + "\n");
  } catch (const std::exception& e) {
    // Left as it was; said once, since every later process measures again
    // and may choose differently (a run resumed in another process then
    // rounds differently from one never stopped).
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      fmt::print(stderr,
                 "hfta: warning: cannot keep measurements in {} ({}); later processes will measure again. "
                 "Set HFTA_CACHE_DIR to a writable folder.\n",
                 path, e.what());
    }
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
