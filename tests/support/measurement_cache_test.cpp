// The measurement cache that processes share: entries added by processes
// at once are all kept (none renames its copy over another's), and a cache
// that cannot be written is left alone.
#include "support/measurement_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "tests/test_support.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using testing::removeFolderOfFiles;

TEST(MeasurementCache, EntriesOfProcessesWritingAtOnceAreAllKept) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("hfta_cache_{}", ::getpid());
  removeFolderOfFiles(dir);
  const std::string path = (dir / "forms.json").string();
  // Each process re-reads, adds and renames 30 times: without the lock, a
  // rename between another's read and rename drops that one's entry.
  constexpr int kProcesses = 6, kEntries = 30;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int e = 0; e < kEntries; ++e) updateCacheFile(path, fmt::format("p{} e{}", p, e), e);
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto cache = readCacheFile(path);
  EXPECT_EQ(cache.size(), size_t{kProcesses * kEntries});
  for (int p = 0; p < kProcesses; ++p) {
    for (int e = 0; e < kEntries; ++e) {
      const auto key = fmt::format("p{} e{}", p, e);
      ASSERT_TRUE(cache.contains(key)) << key << " was lost";
      EXPECT_EQ(cache[key], e) << key;
    }
  }
  removeFolderOfFiles(dir);
}

TEST(MeasurementCache, AnUnwritableCacheIsLeftAlone) {
  const std::string path = "/proc/hfta_no_such_folder/forms.json";
  EXPECT_NO_THROW(updateCacheFile(path, "key", 1));
  EXPECT_TRUE(readCacheFile(path).empty());
}

}  // namespace
}  // namespace hfta
