#include "dist/world.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <map>

#include "passes/hfta/hfta.h"

namespace hfta::dist {
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
  return world;
}

Group Group::connect(const World& world, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(world.master_port);
  options.isServer = world.rank == 0 && !world.agent_store;
  options.numWorkers = world.size;
  options.timeout = timeout;
  Group group;
  group.store_ = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
  group.backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
      group.store_, world.rank, world.size, c10d::ProcessGroupGloo::Options::create_default(timeout));
  return group;
}

void Group::averageInPlace(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  // Buckets per dtype and device, filled in the order given.
  struct Bucket {
    std::vector<at::Tensor> tensors;
    int64_t bytes = 0;
  };
  std::map<std::pair<at::ScalarType, std::string>, std::vector<Bucket>> buckets;
  for (const auto& t : tensors) {
    auto& list = buckets[{t.scalar_type(), t.device().str()}];
    const int64_t bytes = t.numel() * t.element_size();
    if (list.empty() || list.back().bytes + bytes > bucket_bytes) list.emplace_back();
    list.back().tensors.push_back(t);
    list.back().bytes += bytes;
  }
  for (auto& [key, list] : buckets) {
    for (auto& bucket : list) {
      std::vector<at::Tensor> flat_parts;
      for (const auto& t : bucket.tensors) flat_parts.push_back(t.reshape(-1));
      std::vector<at::Tensor> flat{at::cat(flat_parts)};
      backend_->allreduce(flat)->wait();
      flat[0].div_(size());
      int64_t offset = 0;
      for (auto& t : bucket.tensors) {
        t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
  }
}

void Group::barrier() { backend_->barrier()->wait(); }

}  // namespace hfta::dist
