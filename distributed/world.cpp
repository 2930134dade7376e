#include "distributed/world.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef HFTA_DISTRIBUTED_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <map>

#include "support/error_summary.h"
#include "support/user_error.h"

namespace hfta::distributed {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

int number(const char* name, const std::string& text, int low, int high) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < low || value > high) {
    throw UserError(fmt::format("environment variable {}={:?} is not a whole number from {} to {} (torchrun sets it)",
                                name, text, low, high));
  }
  return value;
}

int required(const char* name, int low, int high) {
  const auto text = variable(name);
  if (!text) throw UserError(fmt::format("WORLD_SIZE is set but {} is not (run under torchrun, or set both)", name));
  return number(name, *text, low, high);
}

}  // namespace

std::optional<World> worldFromEnvironment() {
  const auto size_text = variable("WORLD_SIZE");
  if (!size_text) return std::nullopt;
  World world;
  world.size = number("WORLD_SIZE", *size_text, 1, 1 << 20);
  world.rank = required("RANK", 0, world.size - 1);
  world.local_rank = variable("LOCAL_RANK") ? required("LOCAL_RANK", 0, world.size - 1) : 0;
  world.master_addr = variable("MASTER_ADDR").value_or("127.0.0.1");
  world.agent_store = variable("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  world.master_port = required("MASTER_PORT", 1, 65535);
  if (variable("TORCHELASTIC_RESTART_COUNT")) world.restart_count = required("TORCHELASTIC_RESTART_COUNT", 0, 1 << 20);
  return world;
}

namespace {

c10::intrusive_ptr<c10d::Backend> backendFor(const c10::intrusive_ptr<c10d::Store>& store, const World& world,
                                             c10::Device device, std::chrono::milliseconds timeout) {
  if (device.is_cuda()) {
#ifdef HFTA_DISTRIBUTED_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, world.rank, world.size, options);
#else
    throw UserError("data-parallel training on CUDA needs hfta built with CUDA (NCCL); this build has none");
#endif
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, world.rank, world.size,
                                                     c10d::ProcessGroupGloo::Options::create_default(timeout));
}

// Tensors of one dtype and device flattened into one, in the order given.
struct Bucket {
  std::vector<at::Tensor> tensors;
  int64_t bytes = 0;
  at::Tensor flat;
};

std::vector<Bucket> bucketsOf(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  std::map<std::pair<at::ScalarType, std::string>, std::vector<Bucket>> by_kind;
  for (const auto& t : tensors) {
    auto& list = by_kind[{t.scalar_type(), t.device().str()}];
    const int64_t bytes = t.numel() * t.element_size();
    if (list.empty() || list.back().bytes + bytes > bucket_bytes) list.emplace_back();
    list.back().tensors.push_back(t);
    list.back().bytes += bytes;
  }
  std::vector<Bucket> buckets;
  for (auto& [kind, list] : by_kind) {
    for (auto& bucket : list) {
      std::vector<at::Tensor> parts;
      for (const auto& t : bucket.tensors) parts.push_back(t.reshape(-1));
      bucket.flat = at::cat(parts);
      buckets.push_back(std::move(bucket));
    }
  }
  return buckets;
}

// The sums' values copied back into the tensors they were flattened from.
void unflatten(std::vector<Bucket>& buckets) {
  for (auto& bucket : buckets) {
    int64_t offset = 0;
    for (auto& t : bucket.tensors) {
      t.copy_(bucket.flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

CollectiveError failure(const char* what, int ranks, const std::exception& e) {
  return CollectiveError(fmt::format("the {} across {} ranks failed (a rank stopped, or stopped answering): {}", what,
                                     ranks, errorSummary(e)));
}

}  // namespace

c10::intrusive_ptr<c10d::Store> connectStore(const World& world, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(world.master_port);
  options.isServer = world.rank == 0 && !world.agent_store;
  options.numWorkers = world.size;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::PrefixStore>(fmt::format("hfta/attempt_{}", world.restart_count),
                                                  c10::make_intrusive<c10d::TCPStore>(world.master_addr, options));
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("rank {} of {} could not reach the store at {}:{}: {}", world.rank, world.size,
                                world.master_addr, world.master_port, errorSummary(e)));
  }
}

Group Group::connect(const World& world, c10::Device device, std::chrono::milliseconds timeout) {
  Group group;
  group.store_ = connectStore(world, timeout);
  try {
    group.backend_ = backendFor(group.store_, world, device, timeout);
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("rank {} of {} could not join the others at {}:{}: {}", world.rank, world.size,
                                world.master_addr, world.master_port, errorSummary(e)));
  }
  return group;
}

c10::intrusive_ptr<c10d::Work> Group::startSum(std::vector<at::Tensor>& tensors, const char* what) {
  try {
    return backend_->allreduce(tensors);
  } catch (const std::exception& e) {
    throw failure(what, size(), e);
  }
}

void Group::wait(const std::vector<c10::intrusive_ptr<c10d::Work>>& works, const char* what) const {
  try {
    for (const auto& work : works) work->wait();
  } catch (const std::exception& e) {
    throw failure(what, size(), e);
  }
}

void Group::sumInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  auto buckets = bucketsOf(tensors, bucket_bytes);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& bucket : buckets) {
    std::vector<at::Tensor> flat{bucket.flat};
    works.push_back(startSum(flat));
  }
  wait(works);
  unflatten(buckets);
}

void Group::broadcastInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  auto buckets = bucketsOf(tensors, bucket_bytes);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    for (auto& bucket : buckets) {
      std::vector<at::Tensor> flat{bucket.flat};
      works.push_back(backend_->broadcast(flat));
    }
  } catch (const std::exception& e) {
    throw failure("broadcast from rank 0", size(), e);
  }
  wait(works, "broadcast from rank 0");
  unflatten(buckets);
}

void Group::barrier() {
  try {
    backend_->barrier()->wait();
  } catch (const std::exception& e) {
    throw failure("barrier", size(), e);
  }
}

}  // namespace hfta::distributed
