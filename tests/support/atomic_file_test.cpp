// Writes that cannot lose data: a writer that fails (an exception, a full
// disk in the last flush) leaves the old file as it was and no temporary
// file behind; a group of files is all-or-nothing; new files get the mode
// the umask gives.
#include "support/atomic_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_support.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

class AtomicFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("hfta_atomic_{}_{}", ::getpid(), counter_++);
    fs::create_directories(dir_);
  }
  void TearDown() override { testing::removeFolderOfFiles(dir_); }
  // The names in the folder, sorted: what a failed write may not add to.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir_)) out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  static inline int counter_ = 0;
};

TEST_F(AtomicFilesTest, WritesTheWholeFile) {
  writeFileAtomically(path("a.txt"), "hello");
  EXPECT_EQ(read(path("a.txt")), "hello");
  EXPECT_EQ(names(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFilesTest, AWriterThatThrowsLeavesTheOldFileAndNoTemporary) {
  write(path("a.txt"), "old");
  EXPECT_THROW(writeAtomically(path("a.txt"),
                               [](std::ostream& out) {
                                 out << "half of the new";
                                 throw std::runtime_error("the writer failed");
                               }),
               FileWriteError);
  EXPECT_EQ(read(path("a.txt")), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"a.txt"});
}

// RLIMIT_FSIZE makes the kernel refuse writes past a size (EFBIG): a real
// write failure, here in the last flush of a buffered stream, the failure
// that a check of the stream before flushing does not see.
TEST_F(AtomicFilesTest, AFailedFinalFlushLeavesTheOldFile) {
  write(path("a.txt"), "old");
  const std::string contents(1000, 'x');  // less than the stream's buffer: written in the final flush only
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 999;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    writeFileAtomically(path("a.txt"), contents);
  } catch (const FileWriteError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  EXPECT_NE(message.find("a.txt"), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read(path("a.txt")), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFilesTest, AGroupIsAllOrNothing) {
  write(path("a.txt"), "old a");
  {
    AtomicFiles files;
    files.add(path("a.txt"), [](std::ostream& out) { out << "new a"; });
    files.add(path("b.txt"), [](std::ostream& out) { out << "new b"; });
    EXPECT_THROW(files.add(path("c.txt"), [](std::ostream&) { throw std::runtime_error("no c"); }), FileWriteError);
    // Not committed: destroyed with its temporary files.
  }
  EXPECT_EQ(read(path("a.txt")), "old a");
  EXPECT_EQ(names(), std::vector<std::string>{"a.txt"});

  AtomicFiles files;
  files.add(path("a.txt"), [](std::ostream& out) { out << "new a"; });
  files.add(path("b.txt"), [](std::ostream& out) { out << "new b"; });
  files.commit();
  EXPECT_EQ(read(path("a.txt")), "new a");
  EXPECT_EQ(read(path("b.txt")), "new b");
  EXPECT_EQ(names(), (std::vector<std::string>{"a.txt", "b.txt"}));
}

// The second rename of a group fails (its target became a non-empty
// folder after it was staged): the first file is put back as it was.
TEST_F(AtomicFilesTest, AFailedRenameInAGroupPutsBackTheFilesBeforeIt) {
  write(path("a.txt"), "old a");
  AtomicFiles files;
  files.add(path("a.txt"), [](std::ostream& out) { out << "new a"; });
  files.add(path("b.txt"), [](std::ostream& out) { out << "new b"; });
  files.add(path("c.txt"), [](std::ostream& out) { out << "new c"; });
  fs::create_directory(path("b.txt"));
  write(path("b.txt") + "/inside", "x");
  EXPECT_THROW(files.commit(), FileWriteError);
  EXPECT_EQ(read(path("a.txt")), "old a");
  EXPECT_FALSE(fs::exists(path("c.txt")));
  ::unlink((path("b.txt") + "/inside").c_str());
  ::rmdir(path("b.txt").c_str());
  EXPECT_EQ(names(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFilesTest, NewFilesGetTheModeTheUmaskGives) {
  const mode_t previous = ::umask(027);
  writeFileAtomically(path("a.txt"), "x");
  ::umask(previous);
  struct stat info {};
  ASSERT_EQ(::stat(path("a.txt").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
}

TEST_F(AtomicFilesTest, AMissingFolderOrAFolderAsTheTargetIsAClearError) {
  try {
    writeFileAtomically(path("no/such/a.txt"), "x");
    FAIL() << "no error";
  } catch (const FileWriteError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  fs::create_directory(path("sub"));
  EXPECT_THROW(writeFileAtomically(path("sub"), "x"), FileWriteError);
  ::rmdir(path("sub").c_str());
  EXPECT_TRUE(names().empty());
}

}  // namespace
}  // namespace hfta
