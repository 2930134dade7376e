#pragma once
// hfta's C++ API: fuse B TorchScript modules of one topology into one module
// that trains them all at once (hfta/io.h: load, save, split a member out).
//
//   std::vector<hfta::Member> members = hfta::loadMembers({"m0.pt", "m1.pt"});
//   hfta::FusionResult fused = hfta::fuse(members, {.shared_input = true});
//   hfta::saveModule(fused.module, "fused.pt");
//   torch::jit::Module best = hfta::split(fused.module, 1);
#include <torch/script.h>

#include <string>
#include <vector>

#include "hfta/io.h"

namespace hfta {

struct FuseOptions {
  // All members see one shared, unstacked input (the usual sweep): forward
  // takes the member-shaped input instead of [B, ...], and the first layers
  // read it without copying it B times.
  bool shared_input = false;
  // An array of one member (a baseline run trained the same way as a
  // sweep); hfta-fuse refuses it as a likely mistake.
  bool allow_single_member = false;
  // Segments of the graph choose, by measurement at first use, between
  // their fused ops and the members' own ops (never slower than the
  // members one by one); off, the fused ops run everywhere.
  bool segment_plans = true;
};

// What the fusion did with each node of the member graph.
struct FusionReport {
  struct Entry {
    std::string node;    // the node's kind, e.g. aten::linear
    std::string source;  // the user's source line, "file:line", or ""
    std::string detail;  // the rule family (fused) or why it fell back
  };
  int64_t array_size = 0;
  int64_t uniform_nodes = 0;  // nodes identical in every member, kept as they are
  // Conversions between the member-leading layout ([B, N, C, ...]) and the
  // channel-folded one ([N, B*C, ...], which grouped convolutions and batch
  // norm read) left in the fused graph: the fewer, the fewer copies.
  int64_t layout_conversions = 0;
  std::vector<Entry> fused;
  std::vector<Entry> fallbacks;  // run once per member: correct, but not fused
  // The stretches of the graph that choose their plan at run time: their
  // fused ops, or the members' own ops one member after another (whichever
  // measures faster; runtime/ops/segment_plan.h).
  struct Segment {
    std::string first_source;  // the user's source lines it spans
    std::string last_source;
    int64_t nodes = 0;
    std::string plans;  // "fused | members", or "fused: " and why members cannot run it
  };
  std::vector<Segment> segments;
  std::string plan_graph;  // what the measured plans are kept under (forms.json)

  std::string text() const;
  std::string json() const;
};

struct FusionResult {
  torch::jit::Module module;
  FusionReport report;
};

// Verifies that the members match in lockstep and builds the fused module:
// every parameter and buffer keeps its name and is stacked ([B, ...]);
// forward takes and returns [B, N, ...] (or one shared, unstacked input);
// the module records B and its sources (README.md, "The fused module").
// UserError on mismatch.
FusionResult fuse(const std::vector<Member>& members, const FuseOptions& options = {});

// hfta::fuse of the models in `paths`, loaded a few at a time (one per
// core) and released once their tensors are in the fused module's, so that
// memory holds about one copy of the members' data however many there
// are. What hfta-fuse runs.
FusionResult fuseFiles(const std::vector<std::string>& paths, const FuseOptions& options = {});

}  // namespace hfta
