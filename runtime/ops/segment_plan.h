#pragma once
// Which plan each segment of a fused graph runs (passes/fuse/segment_plans.h
// cuts the graph into segments and emits both plans of each):
//
//   Fused   — the fused ops (grouped convolutions, batched matmuls, one
//             batch norm over B*C channels), today's forms;
//   Members — the members' own ops, one member after another on contiguous
//             per-member tensors: unbound at the segment's entry, stacked
//             at its exit.
//
// Both compute the same function; which is faster depends on the shapes and
// the machine (a chain of small ops can run faster per member than through
// the folded layout's copies). The choice is measured at first use, forward
// and backward, as the op forms are (runtime/ops/autotune.h): the graph's
// first plan op is its clock, and the time from one of its calls to the
// next (one training step: forward, backward, the optimizer, the loop) is
// charged to the plans of that call. After a warm-up the fused plans race
// the members' plans, then each segment in turn tries the other plan
// against the best so far; the winner is kept for the graph, the input
// shapes, dtype, device, grad mode and machine, in memory and in forms.json.
// Training goes on the whole time: every plan gives the same results.
//
// HFTA_AUTOTUNE=0 keeps the heuristic (Fused everywhere); HFTA_SEGMENT_PLAN
// = fused | members forces one plan everywhere (tests run every plan).
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace hfta::segment_plan {

enum class Plan { Fused, Members };

// The forced plan (HFTA_SEGMENT_PLAN, or setForced), if any.
std::optional<Plan> forced();
void setForced(std::optional<Plan> plan);

// The kernel of hfta::segment_plan: whether segment `segment` of the graph
// `graph` (of `segments` with a plan) runs fused this call. `inputs` (the
// first segment's) say which shapes the choice is for.
bool useFused(const std::string& graph, int64_t segment, int64_t segments, const std::vector<at::Tensor>& inputs);

// What was decided for a graph, in forms.json and in this process: per
// signature, the plan of each segment ('F' fused, 'M' members) and the
// median step seconds of every trial, for reports.
struct Decision {
  std::string signature;
  std::string plans;
  std::vector<std::pair<std::string, double>> trials;  // plans tried, median seconds
};
std::vector<Decision> decisions(const std::string& graph);

// Whether every race this process started has ended (a benchmark's warm-up
// runs steps until it has).
bool settled();

// Forgets what was measured in this process (the cache file stays).
void forget();

}  // namespace hfta::segment_plan
