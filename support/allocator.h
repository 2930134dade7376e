#pragma once
// glibc's malloc serves every allocation above 32 MiB (the most its mmap
// threshold can grow to) with a fresh mmap and unmaps it when freed, so
// each training step pays the page faults of touching its large activations
// for the first time, again. A fused array's activations are B times a
// member's and cross that limit where the members' did not: PointNet-cls at
// B = 8, batch 32 allocates 64 MiB per wide layer, and trained 249 samples/s
// fused against 372 for the members one after another; with large blocks
// kept for reuse, 380 against 374 (ResNet-18, B = 4: 31.4 -> 35.0 against
// 35; bench/README.md). PyTorch's CUDA caching allocator keeps GPU memory
// the same way.
#include <functional>

namespace hfta {

// Keeps freed memory for reuse, process-wide; the process's resident
// memory then stays near its peak:
// - PyTorch's CPU tensors of 1 MiB and more come from a cache that keeps
//   freed blocks whole and serves them again by size (CpuBlockCache,
//   support/cpu_block_cache.h: glibc's heap alone let the word LM's 745 MB
//   blocks fall into holes split by small allocations and grew, fit after
//   fit of fresh pages);
// - malloc serves the rest from its heap and never trims it (mallopt
//   M_MMAP_MAX = 0, M_TRIM_THRESHOLD = -1; does nothing on a C library
//   other than glibc). No finite threshold will do: the word LM's fused
//   array (B = 8) freed more than 2 GiB at the top of the heap in a step,
//   and with the 2 GiB threshold this once had, glibc gave it back and the
//   next step faulted it in again (840K page faults a step against 92K,
//   43-45 against 62-67 samples/s; bench/RESULTS.md).
// hfta-train, hfta-tune and the benchmarks call it first thing; a program
// of your own can too (in Python, hfta.keep_large_allocations()).
void keepLargeAllocations();

// Pages this process has faulted in so far (minor faults: no disk read).
long minorPageFaults();

// Runs `run` until one run faults in fewer pages than 1% of those the
// process faulted in before it, at most `max_runs` times, and returns the
// runs made: until the work has settled, its memory mapped and kept. Its
// first runs map what they allocate, and on the 2-core VMs here a page
// faulted in costs 4-15 us: the word LM's fused array (B = 8) faulted in
// 10 GB (2.5 million pages) over its first four steps, each at 1.7-2x a
// settled step's time, and its members stepped one after another faulted
// pages in until their fifth. A settled run faults in none, or a stray few
// hundred pages. How the throughput harness warms each way up and the
// segment plans' race each mix (runtime/ops/segment_plan.h).
int runUntilSettled(const std::function<void()>& run, int max_runs);

}  // namespace hfta
