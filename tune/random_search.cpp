// Random search: every trial trains to R epochs; nothing stops early.
#include "tune/algorithm.h"

namespace hfta::tune {
namespace {

class RandomSearch : public Algorithm {
 public:
  explicit RandomSearch(const AlgorithmOptions& options) : options_(options) {}

  std::vector<Job> next(int64_t capacity) override {
    std::vector<Job> jobs;
    while (started_ < options_.trials && static_cast<int64_t>(jobs.size()) < capacity) {
      jobs.push_back({started_++, 0, 0, 0, options_.max_epochs});
    }
    return jobs;
  }
  void report(const Job& /*job*/, double /*metric*/) override {}
  std::vector<Decision> decisions() const override { return {}; }
  int64_t trials() const override { return started_; }

 private:
  AlgorithmOptions options_;
  int64_t started_ = 0;
};

}  // namespace

std::unique_ptr<Algorithm> makeRandomSearch(const AlgorithmOptions& options) {
  return std::make_unique<RandomSearch>(options);
}

}  // namespace hfta::tune
