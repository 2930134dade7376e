#include "runtime/ops/segment_plan.h"

#include <fmt/format.h>
#ifdef HFTA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "runtime/ops/autotune.h"
#include "runtime/ops/ops.h"
#include "support/measurement_cache.h"
#include "support/user_error.h"

namespace hfta::segment_plan {
namespace {

using Clock = std::chrono::steady_clock;

// Steps run fused before anything is timed: the fused ops time their own
// forms in their first call (autotune.h), which no plan should be charged.
constexpr int kWarmupSteps = 2;
// Timed steps per plan and trial, alternating with the best plan so far so
// that a machine slowing down or speeding up hits both: the median of 3
// shrugs off one step another process slowed.
constexpr int kSamples = 3;

// One step of a tuning: the plans it runs, and which median it counts for.
enum class Bucket { Untimed, Best, Trial };
struct Step {
  std::string plans;
  Bucket bucket;
};

// The race of one signature (graph, shapes, grad mode).
struct Tuning {
  bool decided = false;
  std::string best;       // the decision, or the best so far
  std::string trial;      // the plans racing it now
  int64_t next_flip = 0;  // the segment whose plan the next trial flips
  std::deque<Step> queue;
  std::vector<double> best_seconds, trial_seconds;
  std::vector<std::pair<std::string, double>> trials;
  std::string cache_key;
};

struct GraphState {
  std::string current;       // the plans of the step in progress
  Tuning* timing = nullptr;  // the tuning charged for the step in progress
  Bucket timing_bucket = Bucket::Untimed;
  Clock::time_point started;
  std::map<std::vector<int64_t>, Tuning> tunings;
};

struct State {
  std::mutex mutex;
  std::optional<std::optional<Plan>> forced;
  std::unordered_map<std::string, GraphState> graphs;
};

State& state() {
  static State s;
  return s;
}

std::optional<Plan> forcedFromEnvironment() {
  const char* env = std::getenv("HFTA_SEGMENT_PLAN");
  if (env == nullptr || *env == '\0') return std::nullopt;
  const std::string value(env);
  if (value == "fused") return Plan::Fused;
  if (value == "members") return Plan::Members;
  throw UserError(
      fmt::format("HFTA_SEGMENT_PLAN={} is not a plan: use fused or members (or leave it unset to "
                  "measure)",
                  value));
}

double median(std::vector<double> seconds) {
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

void queueRace(Tuning& t) {
  for (int i = 0; i < kSamples; ++i) {
    t.queue.push_back({t.best, Bucket::Best});
    t.queue.push_back({t.trial, Bucket::Trial});
  }
}

void decide(Tuning& t) {
  t.decided = true;
  const auto path = autotune::cachePath();
  if (path.empty()) return;
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& [plans, seconds] : t.trials) trials.push_back({{"plans", plans}, {"median_step_seconds", seconds}});
  updateCacheFile(path, t.cache_key, {{"plans", t.best}, {"trials", trials}});
}

// Fills the queue with the next trial's steps, or decides.
void advance(Tuning& t, int64_t segments) {
  if (t.best.empty()) {  // a new race: fused everywhere against the members everywhere
    t.best = std::string(segments, 'F');
    t.trial = std::string(segments, 'M');
    for (int i = 0; i < kWarmupSteps; ++i) t.queue.push_back({t.best, Bucket::Untimed});
    t.queue.push_back({t.trial, Bucket::Untimed});  // the members' first step allocates
    queueRace(t);
    return;
  }
  const double best = median(t.best_seconds), trial = median(t.trial_seconds);
  if (t.trials.empty()) t.trials.emplace_back(t.best, best);
  t.trials.emplace_back(t.trial, trial);
  if (trial < best) t.best = t.trial;
  t.best_seconds.clear();
  t.trial_seconds.clear();
  // One segment alone decides nothing more; otherwise each segment in turn
  // tries the other plan against the best so far.
  if (segments == 1 || t.next_flip == segments) {
    decide(t);
    return;
  }
  t.trial = t.best;
  t.trial[t.next_flip] = t.best[t.next_flip] == 'F' ? 'M' : 'F';
  ++t.next_flip;
  queueRace(t);
}

Tuning& tuningFor(GraphState& g, const std::string& graph, int64_t segments, const std::vector<at::Tensor>& inputs) {
  std::vector<int64_t> signature{autotune::recordsGradients()};
  autotune::Memo::Signature tensors;
  for (const auto& t : inputs) autotune::appendTensor(tensors, t);
  signature.insert(signature.end(), tensors.begin(), tensors.end());
  auto [it, fresh] = g.tunings.try_emplace(signature);
  Tuning& t = it->second;
  if (!fresh) return t;
  const auto device = inputs.empty() ? c10::Device(c10::kCPU) : inputs.front().device();
  uint64_t shapes = 14695981039346656037ULL;  // FNV-1a of the input shapes: a short key
  for (const int64_t v : tensors) shapes = (shapes ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
  t.cache_key = fmt::format("segment_plan {} {} {} {:016x}", graph, autotune::machine(device),
                            autotune::recordsGradients() ? "train" : "forward", shapes);
  if (const auto path = autotune::cachePath(); !path.empty()) {
    const auto cache = readCacheFile(path);
    const auto entry = cache.find(t.cache_key);
    if (entry != cache.end() && entry->contains("plans") && (*entry)["plans"].is_string() &&
        (*entry)["plans"].get<std::string>().size() == static_cast<size_t>(segments)) {
      t.best = (*entry)["plans"].get<std::string>();
      t.decided = true;
    }
  }
  return t;
}

// Waits for the step in flight on a GPU, so that the clock charges its
// kernels and not only their launches (while tuning only).
void waitForDevice(const std::vector<at::Tensor>& inputs) {
#ifdef HFTA_WITH_CUDA
  if (!inputs.empty() && inputs.front().is_cuda()) at::cuda::device_synchronize();
#endif
}

// The clock: the first plan op of a graph, once per step.
void startStep(GraphState& g, const std::string& graph, int64_t segments, const std::vector<at::Tensor>& inputs) {
  if (g.timing != nullptr) waitForDevice(inputs);
  const auto now = Clock::now();
  if (g.timing != nullptr && g.timing_bucket != Bucket::Untimed) {
    const double seconds = std::chrono::duration<double>(now - g.started).count();
    (g.timing_bucket == Bucket::Best ? g.timing->best_seconds : g.timing->trial_seconds).push_back(seconds);
  }
  g.timing = nullptr;
  Tuning& t = tuningFor(g, graph, segments, inputs);
  if (!t.decided && t.queue.empty()) advance(t, segments);
  if (t.decided) {
    g.current = t.best;
    return;
  }
  const Step step = t.queue.front();
  t.queue.pop_front();
  g.current = step.plans;
  g.timing = &t;
  g.timing_bucket = step.bucket;
  g.started = now;
}

}  // namespace

std::optional<Plan> forced() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.forced) s.forced = forcedFromEnvironment();
  return *s.forced;
}

void setForced(std::optional<Plan> plan) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.forced = plan;
}

bool useFused(const std::string& graph, int64_t segment, int64_t segments, const std::vector<at::Tensor>& inputs) {
  if (const auto plan = forced()) return *plan == Plan::Fused;
  if (!autotune::enabled()) return true;
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  GraphState& g = s.graphs[graph];
  if (segment == 0) startStep(g, graph, segments, inputs);
  if (g.current.size() != static_cast<size_t>(segments) || segment >= segments) return true;
  return g.current[segment] == 'F';
}

std::vector<Decision> decisions(const std::string& graph) {
  std::vector<Decision> out;
  // Those of earlier processes (forms.json), then this one's own.
  const std::string prefix = fmt::format("segment_plan {} ", graph);
  if (const auto path = autotune::cachePath(); !path.empty()) {
    for (const auto& [key, entry] : readCacheFile(path).items()) {
      if (key.rfind(prefix, 0) != 0 || !entry.contains("plans") || !entry["plans"].is_string()) continue;
      Decision d{key, entry["plans"].get<std::string>(), {}};
      for (const auto& trial : entry.value("trials", nlohmann::json::array())) {
        d.trials.emplace_back(trial.value("plans", ""), trial.value("median_step_seconds", 0.0));
      }
      out.push_back(std::move(d));
    }
  }
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.graphs.find(graph);
  if (it == s.graphs.end()) return out;
  for (const auto& [signature, t] : it->second.tunings) {
    const bool listed =
        std::any_of(out.begin(), out.end(), [&](const Decision& d) { return d.signature == t.cache_key; });
    if (t.decided && !listed) out.push_back({t.cache_key, t.best, t.trials});
  }
  return out;
}

bool settled() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& [graph, g] : s.graphs) {
    for (const auto& [signature, t] : g.tunings) {
      if (!t.decided) return false;
    }
  }
  return true;
}

void forget() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.graphs.clear();
}

}  // namespace hfta::segment_plan

namespace hfta::ops {

bool segment_plan(std::string graph, int64_t segment, int64_t segments, at::TensorList inputs) {
  return segment_plan::useFused(graph, segment, segments, inputs.vec());
}

}  // namespace hfta::ops
