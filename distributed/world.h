#pragma once
// Where this process sits among the ranks of a data-parallel run, as
// torchrun (or a cluster scheduler setting the same variables) says, and
// the process group the ranks share: c10d's TCPStore at the master's
// address and a backend over it (Gloo for CPU tensors, NCCL for CUDA).
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hfta::distributed {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // The store is served by someone else (torchrun's agent sets
  // TORCHELASTIC_USE_AGENT_STORE=True): every rank connects as a client.
  bool agent_store = false;
  // torchrun's TORCHELASTIC_RESTART_COUNT: the ranks' keys in the store are
  // kept apart per attempt (a restarted rank must not find the addresses of
  // the ranks it replaces).
  int restart_count = 0;
};

// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_RESTART_COUNT;
// nullopt when WORLD_SIZE is not set (one process). UserError naming the
// variable when one is missing or not a number in range.
std::optional<World> worldFromEnvironment();

// The ranks' key-value store: c10d's TCPStore at the master's address
// (served by rank 0, or by torchrun's agent), its keys kept apart per
// torchrun attempt. A store is all that tuning workers share
// (tune/worker_pool.h); training ranks build a Group over it.
c10::intrusive_ptr<c10d::Store> connectStore(const World& world,
                                             std::chrono::milliseconds timeout = std::chrono::minutes(5));

// A collective failed: a rank died or stopped answering (c10d's own
// message follows what was being done).
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Group {
 public:
  // Connects to (rank 0: starts) the store and builds the backend for
  // tensors on `device`: Gloo for the CPU, NCCL for CUDA (one device per
  // rank); waits up to `timeout` for the other ranks, and a collective up
  // to `timeout` for the slowest.
  static Group connect(const World& world, c10::Device device = at::kCPU,
                       std::chrono::milliseconds timeout = std::chrono::minutes(5));

  int rank() const { return backend_->getRank(); }
  int size() const { return backend_->getSize(); }

  // Each rank ends with the sum over ranks of `tensors` (in place): tensors
  // of one dtype are flattened into buckets of at most `bucket_bytes`, one
  // all-reduce per bucket, all in flight at once. CollectiveError if a rank
  // is gone.
  void sumInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 25 << 20);
  // Each rank ends with rank 0's `tensors` (in place), in buckets likewise.
  void broadcastInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 25 << 20);
  // The pieces of a sum, for a caller that starts sums as its tensors
  // become ready (OverlappedGradientSum): an all-reduce of `tensors`
  // started, and the wait for several; CollectiveError saying `what` failed.
  c10::intrusive_ptr<c10d::Work> startSum(std::vector<at::Tensor>& tensors, const char* what = "all-reduce");
  void wait(const std::vector<c10::intrusive_ptr<c10d::Work>>& works, const char* what = "all-reduce") const;
  void barrier();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
};

}  // namespace hfta::distributed
