#include "runtime/ops/segment_plan.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#ifdef HFTA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "runtime/ops/autotune.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/sync_batch_norm.h"
#include "support/measurement_cache.h"
#include "support/stable_hash.h"
#include "support/user_error.h"

namespace hfta::segment_plan {
namespace {

struct Decided {
  std::string plans;
  Trials trials;
  std::string cache_key;
};

struct GraphState {
  std::string current;  // the plans of the call in progress
  std::map<std::vector<int64_t>, Decided> decided;
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

// The mix a race runs now on this thread (the copy's plan ops read it), or
// nullptr.
thread_local const std::string* racing = nullptr;

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

// Detached copies of the tensors in `v` (in lists and tuples too): the
// race's runs must not reach the caller's autograd graph.
c10::IValue detached(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().detach();
  if (v.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& e : v.toTupleRef().elements()) elements.push_back(detached(e));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorList()) list.push_back(t.detach());
    return list;
  }
  return v;
}

void collectFloating(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (t.defined() && t.is_floating_point() && t.requires_grad()) out.push_back(t);
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) collectFloating(e, out);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) collectFloating(t, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) collectFloating(e, out);
  }
}

void waitForDevice(const std::vector<c10::IValue>& inputs) {
#ifdef HFTA_WITH_CUDA
  for (const auto& v : inputs) {
    if (v.isTensor() && v.toTensor().is_cuda()) {
      at::cuda::device_synchronize();
      return;
    }
  }
#else
  (void)inputs;
#endif
}

// The random generators' state, put back when it goes: the race's runs draw
// (dropout), training must draw what it would have drawn without them.
class KeepRandomState {
 public:
  KeepRandomState() : cpu_(at::detail::getDefaultCPUGenerator().get_state()) {
#ifdef HFTA_WITH_CUDA
    for (c10::DeviceIndex d = 0; d < at::cuda::device_count(); ++d) {
      cuda_.push_back(at::cuda::detail::getDefaultCUDAGenerator(d).get_state());
    }
#endif
  }
  ~KeepRandomState() {
    auto cpu = at::detail::getDefaultCPUGenerator();  // (a handle: set_state is not const)
    cpu.set_state(cpu_);
#ifdef HFTA_WITH_CUDA
    for (size_t d = 0; d < cuda_.size(); ++d) {
      auto cuda = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(d));
      cuda.set_state(cuda_[d]);
    }
#endif
  }
  KeepRandomState(const KeepRandomState&) = delete;
  KeepRandomState& operator=(const KeepRandomState&) = delete;

 private:
  at::Tensor cpu_;
  std::vector<at::Tensor> cuda_;
};

// The most warm-up runs a mix takes to settle before it is timed: the
// race runs on the first call, while the process's heap still grows, and
// a mix timed while it faults in new pages pays what a settled step does
// not (the word LM's fused array, B = 8, faulted for four steps at up to
// 2x a settled step's time; support/allocator.h).
constexpr int kMaxSettleRuns = 5;

// One run of a forward (and backward, when gradients are recorded) by
// `forward` with the plans `plans`.
void runMix(const std::function<c10::IValue()>& forward, const std::vector<c10::IValue>& inputs,
            const std::string& plans) {
  struct Racing {  // (put back when the run throws, too)
    const std::string* outer = racing;
    explicit Racing(const std::string& plans) { racing = &plans; }
    ~Racing() { racing = outer; }
  } scope(plans);
  const auto out = forward();
  std::vector<at::Tensor> outputs;
  if (autotune::recordsGradients()) collectFloating(out, outputs);
  if (!outputs.empty()) {
    at::Tensor total = outputs[0].sum().to(at::kFloat);
    for (size_t i = 1; i < outputs.size(); ++i) total = total + outputs[i].sum().to(at::kFloat);
    total.backward();
  }
  waitForDevice(inputs);
}

// The race for one signature, on a copy of the module.
std::string raceOnACopy(int64_t segments, const c10::IValue& self, const std::vector<c10::IValue>& inputs,
                        Trials& trials) {
  if (!self.isObject()) return std::string(segments, 'F');
  const KeepRandomState keep;
  const torch::jit::Module copy = torch::jit::Module(self.toObject()).deepcopy();
  // deepcopy clones, and a clone of a parameter passes gradients back to
  // it: the copy's parameters become leaves of their own.
  for (at::Tensor p : copy.parameters()) {
    const bool grad = p.requires_grad();
    p.detach_().requires_grad_(grad);
  }
  // The copy's forward through an executor of its own: the copy shares the
  // original's class type and so its forward's executor, which would
  // otherwise count the race's runs as training's own (the profiling
  // executor would profile and specialize the graph on the race's runs).
  const auto& function = torch::jit::toGraphFunction(copy.get_method("forward").function());
  torch::jit::GraphExecutor executor(function.optimized_graph()->copy(), "hfta_segment_race");
  std::vector<c10::IValue> copies;
  for (const auto& v : inputs) copies.push_back(detached(v));
  const auto forward = [&] {
    torch::jit::Stack stack{copy._ivalue()};
    stack.insert(stack.end(), copies.begin(), copies.end());
    executor.run(stack);
    return stack.back();
  };
  const auto compare = [&](const std::vector<std::string>& mixes) {
    std::vector<std::function<void()>> runs;
    for (const auto& plans : mixes) runs.push_back([&, plans] { runMix(forward, copies, plans); });
    return autotune::interleavedMedians(runs, kMaxSettleRuns);  // (a mix that throws: -1)
  };
  return race(segments, compare, trials);
}

std::vector<int64_t> signatureOf(const std::vector<c10::IValue>& inputs) {
  autotune::Memo::Signature shapes;
  for (const auto& v : inputs) {
    if (v.isTensor()) autotune::appendTensor(shapes, v.toTensor());
  }
  std::vector<int64_t> signature{autotune::recordsGradients()};
  signature.insert(signature.end(), shapes.begin(), shapes.end());
  return signature;
}

// Which op forms a fused segment can run in: a plan raced before a form was
// added (the unfolded convolution, revision 2) is raced again. Raise it with
// each new form.
constexpr int kFusedFormsRevision = 2;

std::string cacheKey(const std::string& graph, const std::vector<int64_t>& signature,
                     const std::vector<c10::IValue>& inputs) {
  c10::Device device(c10::kCPU);
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      device = v.toTensor().device();
      break;
    }
  }
  StableHash shapes;  // of the signature past the grad mode: a short key
  for (size_t i = 1; i < signature.size(); ++i) shapes.add(signature[i]);
  return fmt::format("segment_plan {} {} {} {:016x} forms r{}", graph, autotune::machine(device),
                     signature[0] != 0 ? "train" : "forward", shapes.value(), kFusedFormsRevision);
}

std::optional<std::string> cached(const std::string& key, int64_t segments) {
  const auto path = autotune::cachePath();
  if (path.empty()) return std::nullopt;
  const auto cache = readCacheFile(path);
  const auto entry = cache.find(key);
  if (entry == cache.end() || !entry->contains("plans") || !(*entry)["plans"].is_string()) return std::nullopt;
  auto plans = (*entry)["plans"].get<std::string>();
  if (plans.size() != static_cast<size_t>(segments)) return std::nullopt;
  return plans;
}

void store(const std::string& key, const Decided& d) {
  const auto path = autotune::cachePath();
  if (path.empty()) return;
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& [plans, seconds] : d.trials) trials.push_back({{"plans", plans}, {"median_seconds", seconds}});
  updateCacheFile(path, key, {{"plans", d.plans}, {"trials", trials}});
}

// The plans of a call of the graph's first plan op: decided before, in the
// cache, or raced now.
std::string plansFor(const std::string& graph, int64_t segments, const c10::IValue& self,
                     const std::vector<c10::IValue>& inputs) {
  auto& s = state();
  const auto signature = signatureOf(inputs);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto& decided = s.graphs[graph].decided;
    if (const auto it = decided.find(signature); it != decided.end()) return it->second.plans;
  }
  Decided d;
  d.cache_key = cacheKey(graph, signature, inputs);
  if (auto plans = cached(d.cache_key, segments)) {
    d.plans = *plans;
  } else {
    // (Outside the lock: the copy's forward calls the plan ops.)
    d.plans = raceOnACopy(segments, self, inputs, d.trials);
    store(d.cache_key, d);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.graphs[graph].decided.emplace(signature, d);
  return d.plans;
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

std::string race(int64_t segments, const Compare& compare, Trials& trials) {
  auto faster = [](double a, double b) { return a >= 0 && (b < 0 || a < b); };
  // Each challenger is timed beside the best so far, in turn (compare), and
  // wins by its median there: medians timed apart differ by more than most
  // mixes do (a shared machine's rounds swing by up to 1.5x).
  std::string best(segments, 'F');
  auto challenge = [&](const std::string& plans) {
    const bool tried = std::any_of(trials.begin(), trials.end(), [&](const auto& t) { return t.first == plans; });
    if (tried) return;  // (flipping a segment back can give a mix tried already)
    const auto medians = compare({best, plans});
    trials.emplace_back(best, medians[0]);
    trials.emplace_back(plans, medians[1]);
    if (faster(medians[1], medians[0])) best = plans;
  };
  challenge(std::string(segments, 'M'));
  // One segment alone decides nothing more; otherwise each segment in turn
  // tries the other plan against the best so far.
  for (int64_t i = 0; segments > 1 && i < segments; ++i) {
    std::string flipped = best;
    flipped[i] = best[i] == 'F' ? 'M' : 'F';
    challenge(flipped);
  }
  return best;
}

bool useFused(const std::string& graph, int64_t segment, int64_t segments, const c10::IValue& self,
              const std::vector<c10::IValue>& inputs) {
  // The members' batch norms are ATen's, which know nothing of the ranks.
  if (ops::batchNormSynchronized()) return true;
  if (const auto plan = forced()) return *plan == Plan::Fused;
  if (!autotune::enabled()) return true;
  if (racing != nullptr) return racing->size() != static_cast<size_t>(segments) || (*racing)[segment] == 'F';
  auto& s = state();
  if (segment == 0) {
    auto plans = plansFor(graph, segments, self, inputs);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.graphs[graph].current = std::move(plans);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto& current = s.graphs[graph].current;
  return current.size() != static_cast<size_t>(segments) || segment >= segments || current[segment] == 'F';
}

std::vector<Decision> decisions(const std::string& graph) {
  std::vector<Decision> out;
  // Those of earlier processes (forms.json), then this one's own.
  const std::string prefix = fmt::format("segment_plan {} ", graph);
  if (const auto path = autotune::cachePath(); !path.empty()) {
    const auto cache = readCacheFile(path);  // (items() of a temporary would dangle)
    for (const auto& [key, entry] : cache.items()) {
      if (key.rfind(prefix, 0) != 0 || !entry.contains("plans") || !entry["plans"].is_string()) continue;
      Decision d{key, entry["plans"].get<std::string>(), {}};
      for (const auto& trial : entry.value("trials", nlohmann::json::array())) {
        d.trials.emplace_back(trial.value("plans", ""), trial.value("median_seconds", 0.0));
      }
      out.push_back(std::move(d));
    }
  }
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.graphs.find(graph);
  if (it == s.graphs.end()) return out;
  for (const auto& [signature, d] : it->second.decided) {
    const bool listed =
        std::any_of(out.begin(), out.end(), [&](const Decision& listed) { return listed.signature == d.cache_key; });
    if (!listed) out.push_back({d.cache_key, d.plans, d.trials});
  }
  return out;
}

void forget() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.graphs.clear();
}

}  // namespace hfta::segment_plan

namespace hfta::ops {

void segment_plan(const c10::OperatorHandle& /*op*/, torch::jit::Stack* stack) {
  std::vector<c10::IValue> inputs;
  for (const auto& v : stack->back().toListRef()) inputs.push_back(v);
  const c10::IValue self = (*stack)[stack->size() - 2];
  const int64_t segments = (*stack)[stack->size() - 3].toInt();
  const int64_t segment = (*stack)[stack->size() - 4].toInt();
  const std::string graph((*stack)[stack->size() - 5].toStringRef());
  torch::jit::drop(*stack, 5);
  stack->emplace_back(segment_plan::useFused(graph, segment, segments, self, inputs));
}

}  // namespace hfta::ops
