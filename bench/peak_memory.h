#pragma once
// The peak of tensor memory a process holds, for the harness's memory
// columns: on the CPU through a counting wrapper around ATen's CPU
// allocator (every tensor's storage; not what oneDNN allocates for itself,
// nor the program and libraries), on CUDA from the caching allocator's
// statistics (torch.cuda.max_memory_allocated).
#include <ATen/DeviceAccelerator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace hfta::bench {

class PeakMemory {
 public:
  // Counts CPU allocations from now on (installed for the process's rest:
  // tensors outlive any scope).
  static void watchCpu() {
    static CountingAllocator counter;
    c10::SetCPUAllocator(&counter, /*priority=*/UINT8_MAX);
    cpu_watched() = true;
  }
  // The peak bytes held since watchCpu() (CPU) or since the process began
  // (CUDA).
  static int64_t peakBytes(const c10::Device& device) {
    if (device.is_cuda()) {
      const auto stats = at::accelerator::getDeviceStats(device.index() < 0 ? 0 : device.index());
      return stats.allocated_bytes[0].peak;  // (0: the aggregate over pool kinds)
    }
    return cpu_watched() ? peak().load() : -1;
  }

 private:
  static std::atomic<int64_t>& current() {
    static std::atomic<int64_t> bytes{0};
    return bytes;
  }
  static std::atomic<int64_t>& peak() {
    static std::atomic<int64_t> bytes{0};
    return bytes;
  }
  static bool& cpu_watched() {
    static bool watched = false;
    return watched;
  }

  // ATen's CPU kernels (oneDNN's among them) want a plain data pointer
  // whose context is the data and a raw deleter: the sizes live in a map.
  class CountingAllocator final : public c10::Allocator {
   public:
    c10::DataPtr allocate(size_t n) override {
      void* data = c10::alloc_cpu(n);
      {
        std::lock_guard<std::mutex> lock(mutex());
        sizes()[data] = static_cast<int64_t>(n);
      }
      const auto held = current() += static_cast<int64_t>(n);
      auto seen = peak().load();
      while (held > seen && !peak().compare_exchange_weak(seen, held)) {
      }
      return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
    }
    c10::DeleterFnPtr raw_deleter() const override { return &release; }
    void copy_data(void* dest, const void* src, std::size_t count) const override {
      default_copy_data(dest, src, count);
    }

   private:
    static void release(void* data) {
      if (data == nullptr) return;
      {
        std::lock_guard<std::mutex> lock(mutex());
        const auto it = sizes().find(data);
        if (it != sizes().end()) {
          current() -= it->second;
          sizes().erase(it);
        }
      }
      c10::free_cpu(data);
    }
    static std::mutex& mutex() {
      static std::mutex m;
      return m;
    }
    static std::unordered_map<void*, int64_t>& sizes() {
      static std::unordered_map<void*, int64_t> held;
      return held;
    }
  };
};

}  // namespace hfta::bench
