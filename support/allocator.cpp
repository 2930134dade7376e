#include "support/allocator.h"

#include <climits>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hfta {

void keepLargeAllocations() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

}  // namespace hfta
