#pragma once
// Which plan each segment of a fused graph runs (passes/fuse/segment_plans.h
// cuts the graph into segments and emits both plans of each):
//
//   Fused   — the fused ops (grouped convolutions, batched matmuls, one
//             batch norm over B*C channels), today's forms;
//   Members — the members' own ops, one member after another on contiguous
//             per-member tensors: split at the segment's entry, stacked at
//             its exit.
//
// Both compute the same function; which is faster depends on the shapes and
// the machine (a chain of small ops can run faster per member than through
// the folded layout's copies). The choice is measured at first use, as the
// op forms are (runtime/ops/autotune.h), and like them on copies, so that
// it never changes what training computes: the graph's first plan op, on
// its first call for a signature (input shapes, dtype, device, grad mode),
// runs a copy of the module's forward (and backward, when gradients are
// recorded) on detached copies of the inputs, with the random generators'
// state restored after: fused everywhere against the members everywhere,
// then each segment flipped against the best so far, two mixes at a time
// timed in turn as the op forms are (each run until it maps almost no new
// memory, then 3 rounds that take a sample of each, a run or the mean of
// as many as 2 ms take; the median counts). The fastest mix is kept for
// the graph, the signature and the machine, in memory and in forms.json,
// and the call goes on with it.
//
// HFTA_AUTOTUNE=0 keeps the heuristic (Fused everywhere); HFTA_SEGMENT_PLAN
// = fused | members forces one plan everywhere (tests run every plan).
// Batch norm synchronized across ranks (sync_batch_norm.h) runs fused: the
// members' own batch norms are ATen's, which know nothing of the ranks.
#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hfta::segment_plan {

enum class Plan { Fused, Members };

// The forced plan (HFTA_SEGMENT_PLAN, or setForced), if any.
std::optional<Plan> forced();
void setForced(std::optional<Plan> plan);

// The kernel of hfta::segment_plan: whether segment `segment` of the graph
// `graph` (of `segments` with a plan) runs fused this call. The first
// segment's call passes the module (`self`) and its forward's inputs, which
// the race runs copies of.
bool useFused(const std::string& graph, int64_t segment, int64_t segments, const c10::IValue& self,
              const std::vector<c10::IValue>& inputs);

// A race's trials: the plans of each segment ('F' fused, 'M' members) and
// their median seconds, two to a comparison (the best so far, then its
// challenger).
using Trials = std::vector<std::pair<std::string, double>>;
// The median seconds of each mix of plans, timed beside each other
// (negative for a mix that fails).
using Compare = std::function<std::vector<double>(const std::vector<std::string>&)>;
// The race itself: the fastest mix found, every comparison in `trials`.
std::string race(int64_t segments, const Compare& compare, Trials& trials);

// What was decided for a graph, in forms.json and in this process: per
// signature, the plan of each segment and the median seconds of every
// trial, for reports.
struct Decision {
  std::string signature;
  std::string plans;
  Trials trials;
};
std::vector<Decision> decisions(const std::string& graph);

// Forgets what was measured in this process (the cache file stays).
void forget();

}  // namespace hfta::segment_plan
