#include "runtime/ops/autotune.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#ifdef HFTA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "support/allocator.h"
#include "support/measurement_cache.h"

namespace hfta::autotune {
namespace {

// Timed runs per candidate after the warm-up: the median of 3 shrugs off
// one run that another process on a shared machine slowed down. A
// candidate whose fastest run so far takes kHopeless times the fastest run
// of the round stops after the second round: it will not win, and forms
// that lose tend to lose by far (a grouped convolution's weight gradient at
// 2.4x), so measuring costs little more than running the winner. Not after
// the first: one slowed sample must not decide (a harness process read the
// MLP's first fused linear, batched, at 3.4x the per-member form in its
// first sample, unexplained, dropped it, and trained at 0.75x of dense).
constexpr int kRepeats = 3;
constexpr double kHopeless = 3.0;
// A timed sample is at least this long: a candidate that runs faster is
// run as often as it takes, and the sample is the mean. One run of a form
// that takes microseconds times the machine's jitter more than the form
// (the harness's MLP, 80-140 us a run forward and backward, had one linear
// take the per-member form by noise, and trained at 0.68x of dense).
constexpr double kMinSampleSeconds = 2e-3;
constexpr int kMaxRunsPerSample = 1000;

struct State {
  std::mutex mutex;
  std::optional<bool> enabled;
  std::optional<std::string> cache_path;
  bool loaded = false;
  std::map<std::string, size_t> chosen;
  // Bumped whenever the choices are dropped: each Memo drops its own then.
  std::atomic<uint64_t> generation{1};
};

State& state() {
  static State s;
  return s;
}

std::string pathLocked(State& s) {
  if (!s.cache_path) s.cache_path = cacheFile("forms.json");
  return *s.cache_path;
}

void loadLocked(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  const auto path = pathLocked(s);
  if (path.empty()) return;
  const auto cache = readCacheFile(path);  // (items() of a temporary would dangle)
  for (const auto& [key, entry] : cache.items()) {
    if (entry.is_object() && entry.contains("form") && entry["form"].is_number_unsigned()) {
      s.chosen[key] = entry["form"].get<size_t>();
    }
  }
}

}  // namespace

// Why in turn: timed one candidate after another, a burst of another
// process's work as long as one candidate's runs decides the choice (on
// the shared 2-core machines here one process's rounds swing by up to
// 1.5x); in turn, as the harness alternates its ways, it slows the
// candidates it overlaps alike.
std::vector<double> interleavedMedians(const std::vector<std::function<void()>>& candidates, int warm_up_runs) {
  using Clock = std::chrono::steady_clock;
  const size_t n = candidates.size();
  std::vector<std::vector<double>> times(n);
  std::vector<bool> running(n, true);
  std::vector<int> runs_per_sample(n, 1);
  // One sample of candidate c: the mean seconds of its runs_per_sample runs.
  auto sample = [&](size_t c) -> std::optional<double> {
    const auto start = Clock::now();
    try {
      for (int i = 0; i < runs_per_sample[c]; ++i) candidates[c]();
    } catch (const std::exception&) {
      running[c] = false;  // a form this input cannot take is not a choice
      times[c].clear();
      return std::nullopt;
    }
    return std::chrono::duration<double>(Clock::now() - start).count() / runs_per_sample[c];
  };
  // Warm-up: first-use allocations, kernel selection, and (given more than
  // one run) the memory a first step maps; then one more run says how many
  // make a sample.
  for (size_t c = 0; c < n; ++c) {
    runUntilSettled(
        [&] {
          if (running[c]) sample(c);
        },
        warm_up_runs);
    if (const auto seconds = running[c] ? sample(c) : std::nullopt) {
      const double runs = std::ceil(kMinSampleSeconds / std::max(*seconds, 1e-9));
      runs_per_sample[c] = static_cast<int>(std::clamp(runs, 1.0, double{kMaxRunsPerSample}));
    }
  }
  for (int r = 0; r < kRepeats; ++r) {
    std::optional<double> round_best;
    for (size_t c = 0; c < n; ++c) {
      if (!running[c]) continue;
      if (const auto t = sample(c)) {
        times[c].push_back(*t);
        round_best = std::min(round_best.value_or(*t), *t);
      }
    }
    if (r == 0) continue;  // (one sample decides nothing)
    for (size_t c = 0; c < n; ++c) {
      if (running[c] && *std::min_element(times[c].begin(), times[c].end()) > kHopeless * *round_best) {
        running[c] = false;
      }
    }
  }
  std::vector<double> medians(n, -1);
  for (size_t c = 0; c < n; ++c) {
    auto& t = times[c];
    if (t.empty()) continue;
    if (t.size() < kRepeats) {
      medians[c] = t.back();  // hopeless
      continue;
    }
    std::nth_element(t.begin(), t.begin() + kRepeats / 2, t.end());
    medians[c] = t[kRepeats / 2];
  }
  return medians;
}

bool enabled() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.enabled) {
    const char* env = std::getenv("HFTA_AUTOTUNE");
    s.enabled = env == nullptr || std::string(env) != "0";
  }
  return *s.enabled;
}

void setEnabled(bool on) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.enabled = on;
  ++s.generation;
}

std::string cachePath() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return pathLocked(s);
}

void setCachePath(const std::string& path) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.cache_path = path;
  s.loaded = false;
  s.chosen.clear();
  ++s.generation;
}

void forget() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.loaded = false;
  s.chosen.clear();
  ++s.generation;
}

std::string machine(const c10::Device& device) {
  if (!device.is_cuda()) return processorModel();
#ifdef HFTA_WITH_CUDA
  return at::cuda::getDeviceProperties(device.has_index() ? device.index() : at::cuda::current_device())->name;
#else
  return "cuda";  // (a build without CUDA runs nothing there)
#endif
}

bool recordsGradients() { return at::GradMode::is_enabled() && !c10::InferenceMode::is_enabled(); }

std::function<void()> candidate(const std::vector<at::Tensor>& tensors, bool backward, Form form) {
  return [tensors, backward, form = std::move(form)] {
    std::vector<at::Tensor> copies;
    for (const auto& t : tensors) {
      copies.push_back(t.defined() ? t.detach() : t);
      if (backward && t.defined() && t.is_floating_point()) copies.back().requires_grad_();
    }
    const auto y = form(copies);
    if (backward) y.sum().backward();
    if (y.is_cuda()) y.cpu();  // waits for the device
  };
}

size_t choose(const std::string& key, size_t heuristic, const std::vector<std::function<void()>>& candidates) {
  if (!enabled() || candidates.size() < 2) return heuristic;
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    loadLocked(s);
    const auto it = s.chosen.find(key);
    if (it != s.chosen.end() && it->second < candidates.size()) return it->second;
  }
  // Measured outside the lock: a candidate may itself call choose().
  const auto seconds = interleavedMedians(candidates);
  std::optional<size_t> fastest;
  for (size_t c = 0; c < seconds.size(); ++c) {
    if (seconds[c] >= 0 && (!fastest || seconds[c] < seconds[*fastest])) fastest = c;
  }
  const size_t best = fastest.value_or(heuristic);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.chosen[key] = best;
  if (const auto path = pathLocked(s); !path.empty()) {
    updateCacheFile(path, key, {{"form", best}, {"median_seconds", seconds}});
  }
  return best;
}

size_t Memo::Hash::operator()(const Signature& s) const {
  size_t h = s.size();
  for (const int64_t v : s) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

size_t Memo::choose(const Signature& signature, size_t heuristic, const std::function<std::string()>& key,
                    const std::function<std::vector<std::function<void()>>()>& candidates) {
  const uint64_t generation = state().generation.load();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation_ != generation) {
      chosen_.clear();
      generation_ = generation;
    }
    if (const auto it = chosen_.find(signature); it != chosen_.end()) return it->second;
  }
  // (Outside the lock: a candidate may call into the same op.)
  const size_t choice = autotune::choose(key(), heuristic, candidates());
  std::lock_guard<std::mutex> lock(mutex_);
  if (generation_ == generation) chosen_.emplace(signature, choice);
  return choice;
}

void appendTensor(Memo::Signature& signature, const at::Tensor& t) {
  if (!t.defined()) {
    signature.push_back(-1);
    return;
  }
  signature.push_back(t.dim());
  signature.append(t.sizes().begin(), t.sizes().end());
  signature.push_back(static_cast<int64_t>(t.scalar_type()));
  signature.push_back(static_cast<int64_t>(t.device().type()));
  signature.push_back(t.device().index());
}

}  // namespace hfta::autotune
