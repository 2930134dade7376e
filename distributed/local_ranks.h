#pragma once
// What torchrun does on one machine, for a command's own --workers N: this
// process is rank 0 and serves the store; ranks 1 .. N-1 are copies of the
// same command started with torchrun's variables (WORLD_SIZE, RANK,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE). A
// rank killed by a signal is started again in its place (the command goes
// on where the rank was: tune/worker_pool.h); a rank that exits with an
// error ends the run.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "distributed/world.h"

namespace hfta::distributed {

class LocalRanks {
 public:
  // Starts ranks 1 .. size - 1 as `command` (argv; command[0] is replaced
  // by this executable).
  LocalRanks(int size, std::vector<std::string> command, int max_restarts = 3);
  // Stops (SIGTERM) and reaps any rank still running.
  ~LocalRanks();
  LocalRanks(const LocalRanks&) = delete;
  LocalRanks& operator=(const LocalRanks&) = delete;

  // Rank 0's place in the world (a client of the store, like the others).
  const World& world() const { return world_; }
  // Reaps the ranks that have ended: one killed by a signal starts again
  // (up to max_restarts times each); UserError for one that exited with an
  // error, or was killed once too often.
  void poll();
  // Waits for every rank to end; UserError as poll(). Returns true if all
  // ended well, false if one was interrupted (exit 130).
  bool wait();

 private:
  pid_t start(int rank);
  // A rank's exit: restarts a killed rank, remembers an interrupted one,
  // UserError for a failed one.
  void reaped(int rank, int status);

  World world_;
  c10::intrusive_ptr<c10d::Store> server_;
  std::vector<std::string> command_;
  int max_restarts_;
  std::map<pid_t, int> running_;  // pid -> rank
  std::map<int, int> restarts_;
  bool interrupted_ = false;
};

}  // namespace hfta::distributed
