#include "support/allocator.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace hfta {

void keepLargeAllocations() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never trim (mallopt(3))
#endif
}

}  // namespace hfta
