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
namespace hfta {

// Makes malloc serve large blocks from its heap and keep freed memory for
// reuse (mallopt M_MMAP_MAX = 0, a 2 GiB M_TRIM_THRESHOLD): process-wide,
// and the process's resident memory then stays at its peak. hfta-train and
// the benchmarks call it first thing; a program of your own can too, or set
// MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647 in its environment.
// Does nothing on a C library other than glibc.
void keepLargeAllocations();

}  // namespace hfta
