// The module level of hfta::fuse: mirror the members' module hierarchy as
// new classes with stacked tensors (io/module_mirror.h), and give the root
// class the fused forward. The members' own code is kept, as the method
// record::kMemberForward, so that hfta::split (io/split.cpp) can give a
// member back as a plain module.
#include <fmt/format.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "hfta/hfta.h"
#include "io/archive_kind.h"
#include "io/fused_record.h"
#include "io/module_mirror.h"
#include "io/tensor_slots.h"
#include "passes/fuse/graph_fuser.h"
#include "passes/ir/inline_calls.h"
#include "passes/ir/walk.h"
#include "passes/verify/lockstep.h"
#include "support/torch_types.h"

namespace hfta {
namespace {

using torch::jit::Graph;
using torch::jit::Module;

std::shared_ptr<Graph> inlinedForward(const Member& member, const std::string& name) {
  auto forward = member.module.find_method("forward");
  if (!forward) {
    throw UserError(
        fmt::format("{} has no forward method: fusion trains forward. Save a scripted nn.Module "
                    "that has one with torch.jit.save",
                    name));
  }
  auto graph = forward->graph()->copy();
  // (A call left uninlined runs per member, as a fallback the report lists.)
  inlineAllCalls(*graph);
  // Tuples built only to be unpacked (what inlining a function that
  // returns several values leaves) would hide their elements' layouts.
  torch::jit::LowerSimpleTuples(graph);
  return graph;
}

std::string memberName(int64_t b, const std::string& source) { return fmt::format("model {} ({})", b, source); }

// Every tensor slot of `module` by qualified name: the fused module's
// stacked tensors, or a member's, which go into them.
std::map<std::string, at::Tensor> tensorsByName(const Module& module) {
  std::map<std::string, at::Tensor> out;
  for (auto& slot : tensorSlots(module)) out[slot.name] = std::move(slot.tensor);
  return out;
}

// Member 0, against which every other member is matched.
struct FirstMember {
  Module module;
  std::string name;
  std::shared_ptr<Graph> graph;  // its forward, inlined: the template
};

// Member b matched against member 0 in lockstep (modules, then inlined
// graphs), and its tensors copied into slice b of the fused module's.
void addMember(const Member& member, int64_t b, const FirstMember& first,
               const std::map<std::string, at::Tensor>& stacked) {
  const auto name = memberName(b, member.source);
  verifyModulesInLockstep({first.module, member.module}, {first.name, name});
  verifyGraphsInLockstep({{first.graph, first.name}, {inlinedForward(member, name), name}});
  // memcpy, not copy_: ATen's copy would start an OpenMP team in every
  // worker thread, and the teams' spinning starves the workers (8 members
  // took 18 s instead of 3). Matching made sure shapes and dtypes agree.
  // A tied tensor is copied once per name it has: the same data each time.
  for (const auto& [path, tensor] : tensorsByName(member.module)) {
    if (!tensor.defined()) continue;
    const auto slice = stacked.at(path).select(0, b);
    const auto source = tensor.contiguous();
    TORCH_INTERNAL_ASSERT(slice.is_contiguous() && slice.nbytes() == source.nbytes());
    std::memcpy(slice.data_ptr(), source.data_ptr(), source.nbytes());
  }
}

// Members loaded, matched and copied at once: about one per core (each
// holds one member's tensors while it works). More pays nothing on a
// machine whose memory bandwidth a few copies fill.
constexpr int64_t kMaxMemberWorkers = 8;

// add(b) for b = 1 .. count - 1 on up to kMaxMemberWorkers threads, in
// order of b; after an error no new member starts, and the error of the
// lowest b is rethrown (every member before it has been added by then, so
// it is the one a serial run would report).
void forEachOtherMember(int64_t count, const std::function<void(int64_t)>& add) {
  const int64_t workers =
      std::min<int64_t>({count - 1, kMaxMemberWorkers, std::max<int64_t>(1, std::thread::hardware_concurrency())});
  std::atomic<int64_t> next{1};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(count);
  // The caller's graph-executor setting, which is per thread and steers how
  // inlining reads callees' graphs: every member is inlined the same way.
  const bool optimize = torch::jit::getGraphExecutorOptimize();
  auto work = [&] {
    torch::jit::GraphOptimizerEnabledGuard same_as_caller(optimize);
    for (int64_t b = next++; b < count && !failed; b = next++) {
      try {
        add(b);
      } catch (...) {
        errors[b] = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

// Caches what matching reads of the template (each node's schema), so that
// the workers only read it.
void warmSchemas(torch::jit::Block* block) {
  forEachNode(block, [](torch::jit::Node* node) { node->maybeSchema(); });
}

// The members, `member_at(b)` for b < array_size, fused: member 0 sets the
// fused module's shape; each other member is matched against it and
// copied into the stacked tensors, then released.
FusionResult fuseFrom(int64_t array_size, const std::function<Member(int64_t)>& member_at, const FuseOptions& options) {
  if (array_size < (options.allow_single_member ? 1 : 2)) {
    throw UserError(
        fmt::format("fusing needs at least 2 models, got {}{}. Pass every member of the sweep, e.g. "
                    "hfta-fuse model_*.pt -o fused.pt.",
                    array_size, array_size == 1 ? " (" + member_at(0).source + ")" : ""));
  }
  const Member first_member = member_at(0);
  const auto first_name = memberName(0, first_member.source);
  const FirstMember first{first_member.module, first_name, inlinedForward(first_member, first_name)};
  warmSchemas(first.graph->block());

  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  ClassMap classes;
  TensorMemo stack([array_size](const at::Tensor& member) {
    std::vector<int64_t> sizes{array_size};
    sizes.insert(sizes.end(), member.sizes().begin(), member.sizes().end());
    auto stacked = at::empty(sizes, member.options().requires_grad(false));
    stacked.select(0, 0).copy_(member.detach());
    return stacked.requires_grad_(member.requires_grad());
  });
  auto fused_name = [](const std::string& name) {
    const std::string plain = withoutMangling(name);
    return record::kFusedClassPrefix + plain.substr(plain.rfind("__torch__.", 0) == 0 ? 10 : 0);
  };
  Module fused = mirror(first.module, cu, classes, fused_name, stack, true);
  const auto stacked = tensorsByName(fused);
  std::vector<std::string> sources(array_size);
  sources[0] = first_member.source;
  forEachOtherMember(array_size, [&](int64_t b) {
    const Member member = member_at(b);
    addMember(member, b, first, stacked);
    sources[b] = member.source;
  });

  const auto& tmpl = *first.graph;
  std::vector<ValueKind> input_kinds;
  for (size_t i = 0; i < tmpl.inputs().size(); ++i) {
    const bool per_member = i > 0 && containsTensor(tmpl.inputs()[i]->type()) && !options.shared_input;
    input_kinds.push_back(per_member ? ValueKind::Array : ValueKind::Uniform);
  }
  FusionResult result{fused, {}};
  auto forward = fuseMemberGraph(tmpl, array_size, input_kinds, result.report, options.segment_plans);
  retypeGraph(*forward, classes);
  addMethod(fused, "forward", forward);
  auto member_forward = first.graph->copy();
  retypeGraph(*member_forward, classes);
  addMethod(fused, record::kMemberForward, member_forward);

  fused.register_attribute(record::kArraySize, c10::IntType::get(), array_size);
  fused.register_attribute(record::kSources, c10::ListType::ofStrings(), c10::List<std::string>(sources));
  fused.register_attribute(record::kSharedInput, c10::BoolType::get(), options.shared_input);
  return result;
}

}  // namespace

FusionResult fuse(const std::vector<Member>& members, const FuseOptions& options) {
  return fuseFrom(
      static_cast<int64_t>(members.size()), [&](int64_t b) { return members[b]; }, options);
}

FusionResult fuseFiles(const std::vector<std::string>& paths, const FuseOptions& options) {
  // A scripted member's graph and an exported one's differ (TorchScript's
  // branches on `training` against two programs): say so before matching.
  std::optional<size_t> first;  // the first member of either kind
  for (size_t b = 0; b < paths.size(); ++b) {
    const auto kind = archiveKind(paths[b]);
    if (kind != ArchiveKind::TorchScript && kind != ArchiveKind::ExportedProgram) continue;  // loading says what
    if (!first) first = b;
    const auto first_kind = archiveKind(paths[*first]);
    if (kind != first_kind) {
      throw UserError(fmt::format("model {} ({}) is {} and model {} ({}) {}: save every member the same way", b,
                                  paths[b], describeArchiveKind(kind), *first, paths[*first],
                                  describeArchiveKind(first_kind)));
    }
  }
  return fuseFrom(
      static_cast<int64_t>(paths.size()), [&](int64_t b) { return loadMember(paths[b], b); }, options);
}

}  // namespace hfta
