#include "support/cpu_block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/core.h>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace hfta {

namespace {

size_t roundToPages(size_t bytes) {
  static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void* mapBlock(size_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return data == MAP_FAILED ? nullptr : data;
}

}  // namespace

CpuBlockCache::CpuBlockCache() : fallback_(c10::GetDefaultCPUAllocator()) {
  // A process forked while another thread holds the lock (a data loader's
  // workers) would find it held forever: fork waits for it instead.
  ::pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                   [] { instance().mutex_.unlock(); });
}

CpuBlockCache& CpuBlockCache::instance() {
  // Never destroyed: tensors in static storage may be freed after main.
  static auto* cache = new CpuBlockCache();
  return *cache;
}

void CpuBlockCache::install() {
  static std::once_flag once;
  std::call_once(once, [] { c10::SetCPUAllocator(&instance()); });
}

c10::DataPtr CpuBlockCache::allocate(size_t bytes) {
  if (bytes < kMinBytes) return fallback_->allocate(bytes);
  const size_t wanted = roundToPages(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* data = nullptr;
  size_t size = wanted;
  if (const auto fit = kept_.lower_bound(wanted);
      fit != kept_.end() && fit->first - wanted <= fit->first / kSlackDivisor) {
    data = fit->second.data;
    size = fit->first;
    stats_.kept_bytes -= size;
    kept_.erase(fit);
    ++stats_.reused;
  } else {
    data = mapBlock(size);
    if (data == nullptr && !kept_.empty()) {  // the kept blocks given back first, then once more
      while (!kept_.empty()) unmapOldestLocked();
      data = mapBlock(size);
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError, data != nullptr,
        fmt::format("hfta: cannot map {} bytes for a CPU tensor ({} bytes in use)", size, stats_.in_use_bytes));
    ++stats_.mapped;
  }
  in_use_.emplace(data, size);
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
}

void CpuBlockCache::release(void* data) {
  auto& cache = instance();
  {
    std::lock_guard<std::mutex> lock(cache.mutex_);
    if (const auto it = cache.in_use_.find(data); it != cache.in_use_.end()) {
      const size_t size = it->second;
      cache.in_use_.erase(it);
      cache.stats_.in_use_bytes -= size;
      // First among blocks of its size, so that the next request takes the
      // block freed last, whose pages are the likeliest still in cache.
      cache.kept_.emplace_hint(cache.kept_.lower_bound(size), size, Kept{data, ++cache.frees_});
      cache.stats_.kept_bytes += size;
      // What is kept stays below the most ever in use at once: a process
      // whose blocks change size (another batch size, evaluation) maps at
      // most twice its peak.
      while (cache.stats_.kept_bytes > cache.stats_.peak_in_use_bytes) cache.unmapOldestLocked();
      return;
    }
  }
  cache.fallback_->raw_deleter()(data);  // a small block (raw_allocate's)
}

void CpuBlockCache::unmapOldestLocked() {
  const auto oldest = std::min_element(
      kept_.begin(), kept_.end(), [](const auto& a, const auto& b) { return a.second.freed_at < b.second.freed_at; });
  ::munmap(oldest->second.data, oldest->first);
  stats_.kept_bytes -= oldest->first;
  ++stats_.unmapped;
  kept_.erase(oldest);
}

CpuBlockCache::Stats CpuBlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CpuBlockCache::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!kept_.empty()) unmapOldestLocked();
}

}  // namespace hfta
