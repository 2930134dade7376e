#include "distributed/local_ranks.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "support/user_error.h"

namespace hfta::distributed {
namespace {

constexpr int kExitInterrupted = 130;

}  // namespace

LocalRanks::LocalRanks(int size, std::vector<std::string> command, int max_restarts)
    : command_(std::move(command)), max_restarts_(max_restarts) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  server_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  world_.rank = 0;
  world_.size = size;
  world_.master_addr = "127.0.0.1";
  world_.master_port = static_cast<c10d::TCPStore&>(*server_).getPort();
  world_.agent_store = true;  // served here: every rank is a client
  for (int rank = 1; rank < size; ++rank) running_[start(rank)] = rank;
}

LocalRanks::~LocalRanks() {
  for (const auto& [pid, rank] : running_) ::kill(pid, SIGTERM);
  for (const auto& [pid, rank] : running_) ::waitpid(pid, nullptr, 0);
}

pid_t LocalRanks::start(int rank) {
  std::vector<std::string> env{fmt::format("WORLD_SIZE={}", world_.size),
                               fmt::format("RANK={}", rank),
                               fmt::format("LOCAL_RANK={}", rank),
                               "MASTER_ADDR=127.0.0.1",
                               fmt::format("MASTER_PORT={}", world_.master_port),
                               "TORCHELASTIC_USE_AGENT_STORE=True"};
  const pid_t pid = ::fork();
  if (pid < 0) throw UserError(fmt::format("cannot start worker {}: {}", rank, std::strerror(errno)));
  if (pid == 0) {  // exec at once: this process may have run OpenMP
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (auto& a : command_) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

void LocalRanks::reaped(int rank, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitInterrupted) {
    interrupted_ = true;
    return;
  }
  if (WIFEXITED(status)) {
    throw UserError(fmt::format("worker {} exited with {} (its error is above)", rank, WEXITSTATUS(status)));
  }
  if (++restarts_[rank] > max_restarts_) {
    throw UserError(
        fmt::format("worker {} was killed ({}) {} times", rank, strsignal(WTERMSIG(status)), restarts_[rank]));
  }
  fmt::print(stderr, "hfta: worker {} was killed ({}); a new worker {} goes on with its work\n", rank,
             strsignal(WTERMSIG(status)), rank);
  running_[start(rank)] = rank;
}

void LocalRanks::poll() {
  for (auto it = running_.begin(); it != running_.end();) {
    int status = 0;
    if (::waitpid(it->first, &status, WNOHANG) == it->first) {
      const int rank = it->second;
      it = running_.erase(it);
      reaped(rank, status);
    } else {
      ++it;
    }
  }
}

bool LocalRanks::wait() {
  while (!running_.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    const auto it = running_.find(pid);
    if (it == running_.end()) continue;
    const int rank = it->second;
    running_.erase(it);
    reaped(rank, status);
  }
  return !interrupted_;
}

}  // namespace hfta::distributed
