#include "runtime/atomic_file.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace hfta {

void writeAtomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw FileWriteError(fmt::format("cannot write {}: folder {} does not exist", path, dir.string()));
  }
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    throw FileWriteError(fmt::format("cannot write {}: {} (choose a writable path)", path, std::strerror(errno)));
  }
  close(fd);
  try {
    write(tmp);
  } catch (const c10::Error& e) {
    std::remove(tmp.c_str());
    const std::string what = e.what_without_backtrace();
    throw FileWriteError(fmt::format("cannot write {}: {}", path, what.substr(0, what.find('\n'))));
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw FileWriteError(fmt::format("cannot write {}: {}", path, e.what()));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw FileWriteError(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

}  // namespace hfta
