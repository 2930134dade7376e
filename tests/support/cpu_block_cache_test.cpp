// The CPU allocator that keeps large blocks whole: a block freed serves the
// next request of its size (up to its slack) without faulting its pages in
// again, small blocks stay with PyTorch's own allocator, raw allocations of
// both kinds are freed by its raw deleter, and what it keeps stays below
// its peak in use.
#include "support/cpu_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <cstring>

#include "support/allocator.h"

namespace hfta {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

CpuBlockCache& cache() { return CpuBlockCache::instance(); }

TEST(CpuBlockCache, AFreedBlockServesTheNextRequestOfItsSize) {
  const auto before = cache().stats();
  void* first = nullptr;
  {
    const auto block = cache().allocate(6 * kMiB);
    first = block.get();
  }
  const auto block = cache().allocate(6 * kMiB);
  EXPECT_EQ(block.get(), first);
  const auto after = cache().stats();
  EXPECT_EQ(after.mapped - before.mapped, 1);
  EXPECT_EQ(after.reused - before.reused, 1);
}

TEST(CpuBlockCache, AKeptBlockServesSmallerRequestsWithinItsSlack) {
  cache().trim();
  void* kept = nullptr;
  {
    const auto block = cache().allocate(8 * kMiB);
    kept = block.get();
  }
  {
    // 8 MiB less a quarter is the smallest request it serves.
    const auto block = cache().allocate(6 * kMiB);
    EXPECT_EQ(block.get(), kept);
  }
  const auto before = cache().stats();
  const auto smaller = cache().allocate(5 * kMiB);  // past the slack: a block of its own
  EXPECT_NE(smaller.get(), kept);
  EXPECT_EQ(cache().stats().mapped - before.mapped, 1);
}

TEST(CpuBlockCache, SmallBlocksStayWithPyTorchsAllocator) {
  const auto before = cache().stats();
  const auto block = cache().allocate(CpuBlockCache::kMinBytes - 1);
  ASSERT_NE(block.get(), nullptr);
  EXPECT_EQ(block.get_deleter(), c10::GetDefaultCPUAllocator()->raw_deleter());
  const auto after = cache().stats();
  EXPECT_EQ(after.mapped, before.mapped);
  EXPECT_EQ(after.reused, before.reused);
}

TEST(CpuBlockCache, TheRawDeleterFreesBlocksOfBothKinds) {
  const auto before = cache().stats();
  void* large = cache().raw_allocate(3 * kMiB);
  void* small = cache().raw_allocate(1000);
  std::memset(large, 1, 3 * kMiB);
  std::memset(small, 1, 1000);
  cache().raw_deleter()(large);
  cache().raw_deleter()(small);  // (PyTorch's own: a wrong free would abort)
  EXPECT_GE(cache().stats().kept_bytes, before.kept_bytes + 3 * kMiB);
}

TEST(CpuBlockCache, AReusedBlockFaultsInNoPages) {
  cache().trim();
  const size_t bytes = 64 * kMiB;
  long first_touch = 0;
  {
    const auto block = cache().allocate(bytes);
    const long before = minorPageFaults();
    std::memset(block.get(), 1, bytes);
    first_touch = minorPageFaults() - before;
  }
  const auto block = cache().allocate(bytes);
  const long before = minorPageFaults();
  std::memset(block.get(), 2, bytes);
  const long second_touch = minorPageFaults() - before;
  // 64 MiB is 16384 pages of 4 KiB (fewer faults where the kernel maps huge
  // pages); the second touch finds them all mapped.
  EXPECT_GT(first_touch, 0);
  EXPECT_LT(second_touch * 100, first_touch) << first_touch << " faults, then " << second_touch;
}

TEST(CpuBlockCache, WhatItKeepsStaysBelowItsPeakInUse) {
  cache().trim();
  { const auto block = cache().allocate(32 * kMiB); }
  const auto before = cache().stats();
  const size_t peak = before.peak_in_use_bytes;  // (32 MiB, or more after other tests)
  // Blocks of ever new sizes, each 0.7 of the last (past the slack), each
  // freed before the next: together 2.3 times the peak, so the oldest go.
  for (size_t bytes = peak * 7 / 10; bytes >= CpuBlockCache::kMinBytes; bytes = bytes * 7 / 10) {
    const auto block = cache().allocate(bytes);
    std::memset(block.get(), 0, kMiB);
  }
  const auto after = cache().stats();
  EXPECT_EQ(after.peak_in_use_bytes, peak);
  EXPECT_LE(after.kept_bytes, peak);
  EXPECT_GT(after.unmapped, before.unmapped);
  EXPECT_EQ(after.reused, before.reused);
}

TEST(CpuBlockCache, TensorsUseItOnceInstalled) {
  keepLargeAllocations();
  ASSERT_EQ(c10::GetCPUAllocator(), &cache());
  const auto before = cache().stats();
  const void* first = nullptr;
  {
    auto t = at::arange(1 << 20, at::kFloat);  // 4 MiB
    first = t.data_ptr();
  }
  auto t = at::full({1 << 20}, 2.5f);
  EXPECT_EQ(t.data_ptr(), first);
  EXPECT_EQ(t.sum().item<double>(), 2.5 * (1 << 20));
  EXPECT_GE(cache().stats().reused - before.reused, 1);
}

}  // namespace
}  // namespace hfta
