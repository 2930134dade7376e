#include "tune/array_planner.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "support/measurement_cache.h"
#include "support/user_error.h"
#include "tune/trial_config.h"

namespace hfta::tune {
namespace {

// Steps before timing (first-use allocations, the executor's profiling
// runs), then steps timed.
constexpr int64_t kWarmupSteps = 3, kTimedSteps = 5;

// FNV-1a: a digest of the model file that stays the same across builds.
uint64_t digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 1469598103934665603ULL;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
    h = (h ^ static_cast<unsigned char>(*it)) * 1099511628211ULL;
  }
  return h;
}

std::string cacheKey(const train::RunConfig& config, int64_t cap) {
  return fmt::format("{:016x}|{}|{}|{} threads|cap {}", digest(config.model), runKey(config), processorModel(),
                     at::get_num_threads(), cap);
}

// Training samples per second of a fresh array of `b` members.
double throughput(const train::RunConfig& trial, int64_t b) {
  auto config = trial;
  config.array_size = b;
  config.seeds.clear();
  for (int64_t m = 0; m < b; ++m) config.seeds.push_back(static_cast<uint64_t>(m));
  config.options.epochs = 1;
  train::Run run(config);
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  int64_t timed = 0;
  run.nextEpoch([&](int64_t done, int64_t /*total*/) {
    if (done == kWarmupSteps) start = Clock::now();
    if (done > kWarmupSteps) timed = done - kWarmupSteps;
    return timed >= kTimedSteps;
  });
  if (timed == 0) {
    throw UserError(
        fmt::format("the data set has too few batches ({} or fewer) to measure a step: give more data or "
                    "--array-size",
                    kWarmupSteps));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(b * config.options.batch_size * timed) / seconds;
}

// The process's peak resident memory, and the machine's, in MiB.
double peakMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}
double machineMib() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

nlohmann::json toJson(const std::vector<Measurement>& measured) {
  auto out = nlohmann::json::array();
  for (const auto& m : measured) out.push_back({m.array_size, m.samples_per_second, m.peak_mib});
  return out;
}

std::vector<Measurement> fromJson(const nlohmann::json& saved) {
  std::vector<Measurement> measured;
  for (const auto& m : saved)
    measured.push_back({m.at(0).get<int64_t>(), m.at(1).get<double>(), m.at(2).get<double>()});
  return measured;
}

}  // namespace

std::string defaultPlanCache() { return cacheFile("array_sizes.json"); }

ArrayPlan planArraySize(const train::RunConfig& config, int64_t cap, const std::string& cache) {
  const auto key = cacheKey(config, cap);
  if (!cache.empty()) {
    try {
      const auto saved = readCacheFile(cache).at(key);
      ArrayPlan plan;
      plan.array_size = saved.at("array_size").get<int64_t>();
      plan.measured = fromJson(saved.at("measured"));
      plan.cached = true;
      return plan;
    } catch (const nlohmann::json::exception&) {
      // Not measured yet here, or unreadable: measured now.
    }
  }
  ArrayPlan plan;
  double best = 0;
  for (int64_t b = 1; b <= cap; b *= 2) {
    double rate = 0;
    try {
      rate = throughput(config, b);
    } catch (const c10::OutOfMemoryError&) {
      break;
    }
    const double previous = plan.measured.empty() ? 0 : plan.measured.back().samples_per_second;
    plan.measured.push_back({b, rate, peakMib()});
    if (rate > best) {
      best = rate;
      plan.array_size = b;
    }
    // Growth has stopped; or the next doubling would take half the memory.
    if (rate < (1 + kMinGain) * previous || plan.measured.back().peak_mib > 0.25 * machineMib()) break;
  }
  if (!cache.empty()) {
    updateCacheFile(cache, key, {{"array_size", plan.array_size}, {"measured", toJson(plan.measured)}});
  }
  return plan;
}

}  // namespace hfta::tune
