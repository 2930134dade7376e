#pragma once
// When a way's warm-up is over (train_modes --settle): its first steps
// map the memory they allocate (glibc keeps it afterwards, as
// hfta::keepLargeAllocations sets), and on these VMs a page faulted in
// costs 4-15 us: the word LM's fused array (B = 8) faulted in 10 GB (2.5
// million pages) over its first four steps, at 1.7-2x a settled step's
// time, and the members stepped one after another faulted pages in until
// their fifth. A
// step that maps under 1% of the pages mapped before it is settled (the
// step after settling maps none, or a stray few hundred pages).
#include <sys/resource.h>

namespace hfta::bench {

// Pages the process has faulted in so far (minor faults: no disk read).
inline long minorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Whether a step that faulted in `step_faults` pages, after `before` in
// the process, ran settled.
inline bool settled(long step_faults, long before) { return step_faults * 100 < before; }

// The most steps a warm-up takes past its minimum, to wait for one settled
// step: the word LM took four past the harness's two.
constexpr int kMaxSettleSteps = 20;

}  // namespace hfta::bench
