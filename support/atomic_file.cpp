#include "support/atomic_file.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <streambuf>

namespace hfta {
namespace {

// ---- Temporary files in flight, for the signal handler ----------------
// A fixed table the handler can read without allocating or locking.
constexpr int kFreeSlot = 0, kClaimedSlot = 1, kReadySlot = 2;
struct Slot {
  std::atomic<int> state{kFreeSlot};
  char path[PATH_MAX];
};
std::array<Slot, 64> g_in_flight;

// The slot now holding `path`, or -1 when all are taken (the file is then
// not removed on a signal, which is all that is lost).
int remember(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < static_cast<int>(g_in_flight.size()); ++i) {
    int expected = kFreeSlot;
    if (g_in_flight[i].state.compare_exchange_strong(expected, kClaimedSlot)) {
      std::memcpy(g_in_flight[i].path, path.c_str(), path.size() + 1);
      g_in_flight[i].state = kReadySlot;
      return i;
    }
  }
  return -1;
}

void forget(int slot) {
  if (slot >= 0) g_in_flight[slot].state = kFreeSlot;
}

extern "C" void removeInFlightAndDie(int signal_number) {
  for (auto& slot : g_in_flight) {
    if (slot.state.load() == kReadySlot) ::unlink(slot.path);
  }
  // SA_RESETHAND restored the default action: the signal, pending until
  // this handler returns, ends the process as it would have without us.
  ::raise(signal_number);
}

constexpr std::array<int, 3> kCleanupSignals{SIGINT, SIGTERM, SIGHUP};

// Holds the cleanup signals back while a group is renamed into place, so
// that a Ctrl-C cannot leave it half committed.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t held;
    sigemptyset(&held);
    for (int s : kCleanupSignals) sigaddset(&held, s);
    pthread_sigmask(SIG_BLOCK, &held, &previous_);
  }
  ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

 private:
  sigset_t previous_;
};

// ---- Writing through a file descriptor, every error seen --------------
// std::ofstream reports a failed final flush only to a caller who closes
// it and looks again. This buffer keeps the first errno of any write and
// then accepts and drops the rest, so that the writer always runs to its
// end: LibTorch's archive writer, told of a failed write, throws again
// from its destructor while unwinding, which ends the process. The caller
// calls finish() and checks error() once the writer returns.
//
// Everything goes through one aligned chunk, and whole chunks are written
// with O_DIRECT where the filesystem allows it: the disk reads them from
// this buffer instead of from a copy in the page cache. On the machines
// this project runs on, writing a 2.7 GB fused module through the page
// cache took 6-10 s (allocating and filling 2.7 GB of cache pages) and
// 1.4-2 s direct (bench/README.md, "hfta-fuse at scale"). The last,
// partial chunk goes through the page cache, and fsync follows either way.
class FileBuffer : public std::streambuf {
 public:
  explicit FileBuffer(int fd) : fd_(fd), chunk_(static_cast<char*>(std::aligned_alloc(kAlignment, kChunk))) {
    if (chunk_ == nullptr) throw std::bad_alloc();
    setp(chunk_, chunk_ + kChunk);
  }
  ~FileBuffer() override { std::free(chunk_); }
  FileBuffer(const FileBuffer&) = delete;
  FileBuffer& operator=(const FileBuffer&) = delete;

  int error() const { return error_; }
  // Writes what is left (the last, partial chunk).
  void finish() {
    setDirect(false);
    writeAll(pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(chunk_, chunk_ + kChunk);
  }

 protected:
  int_type overflow(int_type ch) override {
    writeChunk();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  std::streamsize xsputn(const char* data, std::streamsize size) override {
    for (std::streamsize left = size; left > 0;) {
      if (pptr() == epptr()) writeChunk();
      const auto n = std::min<std::streamsize>(left, epptr() - pptr());
      std::memcpy(pptr(), data, static_cast<size_t>(n));
      pbump(static_cast<int>(n));
      data += n;
      left -= n;
    }
    return size;
  }

 private:
  static constexpr size_t kAlignment = 4096;  // what O_DIRECT asks of address, length and offset
  static constexpr size_t kChunk = size_t{8} << 20;

  // A whole chunk: direct if the filesystem takes it (once refused, never
  // again), through the page cache otherwise, or for what a direct write
  // left.
  void writeChunk() {
    size_t done = 0;
    if (error_ == 0 && direct_allowed_) {
      setDirect(true);
      const ssize_t written = direct_ ? ::write(fd_, chunk_, kChunk) : 0;
      if (written < 0 && errno != EINVAL) {
        error_ = errno;
      } else if (written != static_cast<ssize_t>(kChunk)) {  // refused (EINVAL), or written in part
        direct_allowed_ = false;
        setDirect(false);
      }
      done = written > 0 ? static_cast<size_t>(written) : 0;
    }
    writeAll(chunk_ + done, kChunk - done);
    setp(chunk_, chunk_ + kChunk);
  }
  void setDirect(bool on) {
    if (on == direct_) return;
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0 && ::fcntl(fd_, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0) {
      direct_ = on;
    } else if (on) {
      direct_allowed_ = false;
    }
  }
  void writeAll(const char* data, size_t size) {
    while (error_ == 0 && size > 0) {
      const ssize_t written = ::write(fd_, data, size);
      if (written < 0) {
        if (errno != EINTR) error_ = errno;
        continue;
      }
      data += written;
      size -= static_cast<size_t>(written);
    }
  }

  int fd_;
  char* chunk_;
  int error_ = 0;
  bool direct_ = false, direct_allowed_ = true;
};

std::string folderOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string fileNameOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A fresh name next to `path` ("dir/.name.tmp-PID-N"), created empty with
// mode 0666 less the umask; its slot is remembered for the signal handler.
std::pair<std::string, int> createTemporary(const std::string& path, const char* what, int& fd) {
  static std::atomic<uint64_t> counter{0};
  const std::string dir = folderOf(path), name = fileNameOf(path);
  for (;;) {
    std::string temporary = fmt::format("{}/.{}.{}-{}-{}", dir, name, what, ::getpid(), counter++);
    const int slot = remember(temporary);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return {temporary, slot};
    const int error = errno;
    forget(slot);
    if (error != EEXIST) {
      throw FileWriteError(
          fmt::format("cannot write {}: {} (choose a folder you can write to)", path, std::strerror(error)));
    }
  }
}

void checkFolder(const std::string& path) {
  struct stat info {};
  const std::string dir = folderOf(path);
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw FileWriteError(fmt::format("cannot write {}: folder {} does not exist", path, dir));
  }
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    throw FileWriteError(fmt::format("cannot write {}: it is a folder; give a file name", path));
  }
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Flushes a folder's entries (a rename) to the disk. Filesystems that
// cannot sync a folder say EINVAL; nothing more can be done there.
void syncFolder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0 && error != EINVAL) {
    throw FileWriteError(fmt::format("cannot flush folder {} to the disk: {}", dir, std::strerror(error)));
  }
}

}  // namespace

AtomicFiles::~AtomicFiles() { discard(); }

void AtomicFiles::discard() noexcept {
  for (const auto& s : staged_) ::unlink(s.temporary.c_str());
  staged_.clear();
  for (int slot : slots_) forget(slot);
  slots_.clear();
}

void AtomicFiles::add(const std::string& path, const FileWriter& write) {
  checkFolder(path);
  int fd = -1;
  auto [temporary, slot] = createTemporary(path, "tmp", fd);
  std::string failure;
  {
    FileBuffer buffer(fd);
    std::ostream out(&buffer);
    try {
      write(out);
      out.flush();
      buffer.finish();
    } catch (const c10::Error& e) {
      failure = firstLine(e.what_without_backtrace());
    } catch (const std::exception& e) {
      failure = e.what();
    }
    // A write error is the cause of whatever the writer threw after it.
    if (buffer.error() != 0) failure = std::strerror(buffer.error());
    if (failure.empty() && !out) failure = "the write failed";
  }
  if (failure.empty() && ::fsync(fd) != 0) failure = std::strerror(errno);
  if (::close(fd) != 0 && failure.empty()) failure = std::strerror(errno);
  if (!failure.empty()) {
    ::unlink(temporary.c_str());
    forget(slot);
    throw FileWriteError(fmt::format("cannot write {}: {}", path, failure));
  }
  staged_.push_back({path, temporary, "", false});
  slots_.push_back(slot);
}

void AtomicFiles::commit() {
  SignalsHeld held;
  const bool group = staged_.size() > 1;
  size_t done = 0;
  std::string failure;
  for (; done < staged_.size(); ++done) {
    auto& s = staged_[done];
    struct stat info {};
    s.existed = ::lstat(s.path.c_str(), &info) == 0;
    if (group && s.existed) {
      // A second name for the old file, to put back if a later rename fails.
      int fd = -1;
      auto [backup, slot] = createTemporary(s.path, "old", fd);
      ::close(fd);
      ::unlink(backup.c_str());
      slots_.push_back(slot);
      if (::link(s.path.c_str(), backup.c_str()) == 0) s.backup = backup;
    }
    if (::rename(s.temporary.c_str(), s.path.c_str()) != 0) {
      failure = fmt::format("cannot write {}: {}", s.path, std::strerror(errno));
      break;
    }
  }
  if (!failure.empty()) {
    for (size_t j = done; j-- > 0;) {
      const auto& s = staged_[j];
      if (!s.backup.empty()) {
        ::rename(s.backup.c_str(), s.path.c_str());
      } else if (!s.existed) {
        ::unlink(s.path.c_str());
      }
    }
    for (const auto& s : staged_) {
      if (!s.backup.empty()) ::unlink(s.backup.c_str());
    }
    discard();
    throw FileWriteError(failure + (done > 0 ? "; the files written before it were put back as they were" : ""));
  }
  std::set<std::string> folders;
  for (const auto& s : staged_) {
    if (!s.backup.empty()) ::unlink(s.backup.c_str());
    folders.insert(folderOf(s.path));
  }
  staged_.clear();
  discard();
  for (const auto& dir : folders) syncFolder(dir);
}

void writeAtomically(const std::string& path, const FileWriter& write) {
  AtomicFiles file;
  file.add(path, write);
  file.commit();
}

void writeFileAtomically(const std::string& path, const std::string& contents) {
  writeAtomically(
      path, [&](std::ostream& out) { out.write(contents.data(), static_cast<std::streamsize>(contents.size())); });
}

void removeTree(const std::string& path) {
  // Children before their folder; an entry that cannot go stays, and the
  // walk goes on (a best effort, as remove_all with an error_code).
  auto remove = [](const char* entry, const struct stat*, int, struct FTW*) {
    ::remove(entry);
    return 0;
  };
  ::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS);
}

void syncParentFolder(const std::string& path) { syncFolder(folderOf(path)); }

void removeTemporaryFilesOnSignal() {
  struct sigaction action {};
  action.sa_handler = removeInFlightAndDie;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int s : kCleanupSignals) ::sigaction(s, &action, nullptr);
}

}  // namespace hfta
