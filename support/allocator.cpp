#include "support/allocator.h"

#include <sys/resource.h>

#include "support/cpu_block_cache.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hfta {

void keepLargeAllocations() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never trim (mallopt(3))
#endif
  CpuBlockCache::install();
}

long minorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

int runUntilSettled(const std::function<void()>& run, int max_runs) {
  int runs = 0;
  while (runs < max_runs) {
    const long before = minorPageFaults();
    run();
    ++runs;
    if ((minorPageFaults() - before) * 100 < before) break;
  }
  return runs;
}

}  // namespace hfta
