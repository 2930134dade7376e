#pragma once
// Where this process sits among the ranks of a data-parallel run, as
// torchrun (or a cluster scheduler setting the same variables) says, and
// the process group the ranks share: c10d's TCPStore at the master's
// address and a Gloo backend (ProcessGroupGloo) over it.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hfta::dist {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // The store is served by someone else (torchrun's agent sets
  // TORCHELASTIC_USE_AGENT_STORE=True): every rank connects as a client.
  bool agent_store = false;
};

// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and
// TORCHELASTIC_USE_AGENT_STORE;
// nullopt when WORLD_SIZE is not set (one process). UserError naming the
// variable when one is missing or not a number in range.
std::optional<World> worldFromEnvironment();

class Group {
 public:
  // Connects to (rank 0: starts) the store and builds the Gloo backend;
  // waits up to `timeout` for the other ranks.
  static Group connect(const World& world, std::chrono::milliseconds timeout = std::chrono::minutes(5));

  int rank() const { return backend_->getRank(); }
  int size() const { return backend_->getSize(); }

  // Each rank ends with the mean over ranks of `tensors` (in place):
  // tensors of one dtype are flattened into buckets of at most
  // `bucket_bytes`, one all-reduce per bucket.
  void averageInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 25 << 20);
  void barrier();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
};

}  // namespace hfta::dist
