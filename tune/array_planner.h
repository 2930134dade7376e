#pragma once
// How many trials to fuse into one array: the array size with the most
// throughput for this model, batch and device, found by measurement
// (training steps of fresh arrays of B = 1, 2, 4, ... members, until a
// doubling gains less than kMinGain or memory runs short) and cached on
// disk per graph and machine, so that later tuning runs start at once.
#include <string>
#include <utility>
#include <vector>

#include "run/run.h"

namespace hfta::tune {

// A doubling that adds less than this fraction of throughput ends the
// measurement: the step is as busy as it gets, and larger arrays would cost
// memory for the few percent a short timing cannot tell from noise. The
// last size measured is still chosen if it was the fastest: larger arrays
// also share the per-array costs a step's time leaves out (building the
// array, the held-out passes, checkpoints).
constexpr double kMinGain = 0.10;

struct Measurement {
  int64_t array_size = 0;
  double samples_per_second = 0;  // training samples of all members
  // The process's peak resident memory by the end of this size's steps (it
  // only grows, and the sizes do too; CUDA memory is not counted: there an
  // out-of-memory error ends the measurement).
  double peak_mib = 0;
  bool operator==(const Measurement& other) const {
    return array_size == other.array_size && samples_per_second == other.samples_per_second &&
           peak_mib == other.peak_mib;
  }
};

struct ArrayPlan {
  int64_t array_size = 1;
  std::vector<Measurement> measured;  // in the order measured
  bool cached = false;                // read from the cache, not measured now
};

// `config`: a trial's run (its model and run settings); `cap`: the largest
// B to try. `cache`: the cache file (JSON; created if missing; "" for no
// cache).
ArrayPlan planArraySize(const train::RunConfig& config, int64_t cap, const std::string& cache);

// Where the plans are cached: array_sizes.json in hfta's cache folder
// (cacheFile(), support/measurement_cache.h).
std::string defaultPlanCache();

}  // namespace hfta::tune
