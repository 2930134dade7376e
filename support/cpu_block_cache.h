#pragma once
// PyTorch's CPU allocator with large blocks kept whole for reuse by size,
// as its CUDA caching allocator keeps GPU memory: a training step asks for
// the same large blocks every step, and a block freed by one step serves
// the next step's request of its size without a page faulted in again.
//
// glibc's heap, which keepLargeAllocations() (support/allocator.h) makes
// serve every block, keeps freed memory but not its shape: the small
// allocations made between two large ones split the holes the large ones
// leave, a 745 MB block (the word LM's scores at B = 8) then finds no hole
// of its size, and the heap grows by another 745 MB of fresh pages, fit
// after fit: under strace the heap's end rose to 22 GB, and steps that
// mapped fresh pages took 1.5-6x a settled one's time (bench/RESULTS.md).
// Blocks here are mapped apart from the heap and never split, so neither
// happens.
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace hfta {

class CpuBlockCache final : public c10::Allocator {
 public:
  // Blocks of this size and more are kept; smaller ones go to PyTorch's
  // own CPU allocator (malloc's heap serves them well: they fit its holes).
  static constexpr size_t kMinBytes = size_t{1} << 20;
  // A kept block serves a request up to this fraction smaller than itself
  // (1/4: a block at most a third larger), where a tensor's size varies a
  // little (a last, shorter batch).
  static constexpr size_t kSlackDivisor = 4;

  struct Stats {
    size_t in_use_bytes = 0;  // in blocks handed out (mapped: in use + kept)
    size_t kept_bytes = 0;    // in blocks freed and kept for reuse
    size_t peak_in_use_bytes = 0;
    int64_t reused = 0;    // requests served by a kept block
    int64_t mapped = 0;    // requests that mapped a new block
    int64_t unmapped = 0;  // kept blocks given back to the system
  };

  // The process's one cache (the deleters find it without a context).
  static CpuBlockCache& instance();
  // Makes it PyTorch's CPU allocator, once; later calls do nothing. (Large
  // blocks then do not show in the profiler's memory records.)
  static void install();

  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }

  Stats stats() const;
  // Gives every kept block back to the system.
  void trim();

 private:
  CpuBlockCache();
  static void release(void* data);  // a block of either kind
  void unmapOldestLocked();

  struct Kept {
    void* data;
    uint64_t freed_at;  // an order of frees: the oldest is given back first
  };
  c10::Allocator* const fallback_;
  mutable std::mutex mutex_;
  std::multimap<size_t, Kept> kept_;          // by size, the newest first: lower_bound fits best
  std::unordered_map<void*, size_t> in_use_;  // block -> its mapped size
  uint64_t frees_ = 0;
  Stats stats_;
};

}  // namespace hfta
