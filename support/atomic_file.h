#pragma once
// Writing files so that readers see the old file or the whole new one,
// never a part, and a failed write never replaces a good file: each file is
// written to a temporary file next to it (created with the mode the user's
// umask gives), checked through the last byte, flushed to the disk, and
// only then renamed over the old one; the folder is flushed after the
// rename. A group of files is all-or-nothing: every file is written before
// any is renamed, and a rename that fails puts back the files already
// renamed. Temporary files in flight are removed on SIGINT, SIGTERM and
// SIGHUP once removeTemporaryFilesOnSignal() has run.
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hfta {

// Why a file could not be written, in one line that names the path.
struct FileWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What writes a file's contents into the stream it is given; it may throw.
using FileWriter = std::function<void(std::ostream&)>;

// Several files written all-or-nothing:
//   AtomicFiles files;
//   files.add("fused.pt", [&](std::ostream& out) { module.save(out); });
//   files.add("report.json", [&](std::ostream& out) { out << json; });
//   files.commit();
// add() writes the temporary file at once; if it throws, nothing of the
// group reaches its path. Destroying an uncommitted group removes its
// temporary files.
class AtomicFiles {
 public:
  AtomicFiles() = default;
  AtomicFiles(const AtomicFiles&) = delete;
  AtomicFiles& operator=(const AtomicFiles&) = delete;
  ~AtomicFiles();

  // FileWriteError if the folder does not exist, the path is a folder,
  // `write` throws, or any write, flush or close fails (a full disk, a quota).
  void add(const std::string& path, const FileWriter& write);
  // Renames every file into place. If one rename fails, the files renamed
  // before it are put back as they were (an old file restored, a new one
  // removed) and FileWriteError says which path failed.
  void commit();

 private:
  struct Staged {
    std::string path, temporary, backup;
    bool existed = false;
  };
  // Removes the temporary files not committed, and forgets every slot the
  // signal handler knows them by.
  void discard() noexcept;
  std::vector<Staged> staged_;
  std::vector<int> slots_;  // (see atomic_file.cpp: the files in flight)
};

// One file: AtomicFiles with one add() and commit().
void writeAtomically(const std::string& path, const FileWriter& write);
// The same for bytes or text already in memory.
void writeFileAtomically(const std::string& path, const std::string& contents);

// Flushes to the disk the folder entry of `path` (after renaming it).
// FileWriteError if the disk reports an error; filesystems that cannot
// sync a folder are left as they are.
void syncParentFolder(const std::string& path);

// Removes a file or a folder with everything in it, if it is there (POSIX
// calls: the torch wheel's libtorch.so exports its own
// std::filesystem::remove_all, which the dynamic linker binds first and
// which crashes).
void removeTree(const std::string& path);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the temporary
// files in flight and then end the process by the same signal (as it would
// have ended without them). Programs that handle those signals themselves
// (hfta-train stops at the next batch) need not call it.
void removeTemporaryFilesOnSignal();

}  // namespace hfta
