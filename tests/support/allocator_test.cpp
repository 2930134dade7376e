// runUntilSettled: a run settles when it faults in fewer pages than 1% of
// those the process faulted in before it.
#include "support/allocator.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <utility>
#include <vector>

namespace hfta {
namespace {

// Fresh pages, each touched once: 2% of the pages the process has faulted
// in so far (and at least 1000), so that the run that touches them does
// not settle. Small pages: a transparent huge page would fault 512 pages
// in at once.
class FreshPages {
 public:
  ~FreshPages() {
    for (const auto& [block, bytes] : blocks_) munmap(block, bytes);
  }
  void touch() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t pages = static_cast<size_t>(minorPageFaults()) / 50 + 1000;
    void* block = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(block, MAP_FAILED);
    madvise(block, pages * page, MADV_NOHUGEPAGE);
    blocks_.emplace_back(block, pages * page);
    for (size_t i = 0; i < pages; ++i) static_cast<volatile char*>(block)[i * page] = 1;
  }

 private:
  std::vector<std::pair<void*, size_t>> blocks_;
};

TEST(RunUntilSettled, StopsOnTheFirstRunThatFaultsInAlmostNothing) {
  std::vector<char> kept(1 << 20, 1);  // touched before: no fault to read it again
  long sum = 0;
  EXPECT_EQ(runUntilSettled(
                [&] {
                  for (char c : kept) sum += c;
                },
                5),
            1);
  EXPECT_EQ(sum, 1 << 20);

  FreshPages fresh;
  int runs = 0;
  // Fresh pages on the first two runs, none after: the third settles.
  EXPECT_EQ(runUntilSettled(
                [&] {
                  if (++runs <= 2) fresh.touch();
                },
                5),
            3);
  // Fresh pages on every run: it stops at the limit.
  EXPECT_EQ(runUntilSettled([&] { fresh.touch(); }, 4), 4);
}

}  // namespace
}  // namespace hfta
