// The module level of hfta::fuse and hfta::split: mirror the members' module
// hierarchy as new classes with stacked (or, for split, sliced) tensors, and
// give the root class the fused forward. The members' own code is kept, as
// the method below, so that split can give a member back as a plain module.
#include <fmt/format.h>
#include <torch/csrc/jit/passes/lower_tuples.h>

#include <unordered_map>

#include "passes/fuse/graph_fuser.h"
#include "passes/hfta/hfta.h"
#include "passes/ir/diagnostics.h"
#include "passes/ir/inline_calls.h"
#include "passes/ir/walk.h"
#include "passes/verify/lockstep.h"

namespace hfta {
namespace {

using torch::jit::Graph;
using torch::jit::Module;

constexpr const char* kArraySizeAttr = "hfta_array_size";
constexpr const char* kSourcesAttr = "hfta_sources";
constexpr const char* kSharedInputAttr = "hfta_shared_input";
// One member's inlined forward, on member-shaped tensors: what split returns.
constexpr const char* kMemberForward = "hfta_member_forward";
constexpr const char* kFusedNamespace = "__torch__.hfta_fused.";

using ClassMap = std::unordered_map<c10::ClassTypePtr, c10::ClassTypePtr>;
// Makes the new module's tensor from the tensors at one qualified name.
using TensorMaker = std::function<at::Tensor(const std::vector<at::Tensor>&, bool is_parameter)>;

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

// Builds a module mirroring `level` (the same submodule in every source
// module), with tensors from make_tensor and the other attributes copied.
Module mirror(const std::vector<Module>& level, const std::shared_ptr<torch::jit::CompilationUnit>& cu,
              ClassMap& classes, const std::function<std::string(const std::string&)>& class_name,
              const TensorMaker& make_tensor, bool is_root) {
  const auto src_type = level[0].type();
  auto known = classes.find(src_type);
  Module out = known != classes.end() ? Module(cu, known->second)
                                      : Module(c10::QualifiedName(class_name(src_type->name()->qualifiedName())), cu,
                                               /*shouldMangle=*/true);
  classes.emplace(src_type, out.type());
  for (size_t slot = 0; slot < src_type->numAttributes(); ++slot) {
    const auto name = src_type->getAttributeName(slot);
    if (is_root && name.rfind("hfta_", 0) == 0) continue;  // a fused module's own record
    const auto type = src_type->getAttribute(slot);
    const auto value = level[0]._ivalue()->getSlot(slot);
    const bool is_parameter = src_type->is_parameter(slot);
    if (value.isModule()) {
      std::vector<Module> children;
      for (const auto& m : level) children.push_back(m.attr(name).toModule());
      out.register_module(name, mirror(children, cu, classes, class_name, make_tensor, false));
    } else if (value.isTensor()) {
      std::vector<at::Tensor> tensors;
      for (const auto& m : level) tensors.push_back(m.attr(name).toTensor());
      out.register_attribute(name, type, make_tensor(tensors, is_parameter), is_parameter, src_type->is_buffer(slot));
    } else {
      // None in an Optional[Tensor] slot (a conv without bias) is the same in
      // every member (lockstep matching checked it).
      if (containsTensor(type) && !value.isNone()) {
        throw UserError(
            fmt::format("attribute `{}` of {} holds tensors inside a {}; hfta fuses tensor attributes, "
                        "parameters and buffers only. Store the tensors as separate buffers.",
                        name, src_type->name()->qualifiedName(), type->annotation_str()));
      }
      out.register_attribute(name, type, value, is_parameter, src_type->is_buffer(slot));
    }
  }
  return out;
}

// Values of the members' classes take the new module's classes.
void retypeBlock(torch::jit::Block* block, const ClassMap& classes) {
  auto retype = [&](torch::jit::Value* v) {
    if (auto cls = v->type()->cast<c10::ClassType>()) {
      auto it = classes.find(cls);
      if (it != classes.end()) v->setType(it->second);
    }
  };
  for (auto* v : block->inputs()) retype(v);
  forEachNode(block, [&](torch::jit::Node* node) {
    for (auto* v : node->outputs()) retype(v);
    for (auto* inner : node->blocks()) {
      for (auto* v : inner->inputs()) retype(v);
    }
  });
}

void addMethod(Module& module, const std::string& name, const std::shared_ptr<Graph>& graph) {
  auto* fn =
      module._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*module.type()->name(), name), graph);
  module.type()->addMethod(fn);
}

}  // namespace

FusionResult fuse(const std::vector<Member>& members, const FuseOptions& options) {
  const auto array_size = static_cast<int64_t>(members.size());
  if (array_size < (options.allow_single_member ? 1 : 2)) {
    throw UserError(
        fmt::format("fusing needs at least 2 models, got {}{}. Pass every member of the sweep, e.g. "
                    "hfta-fuse model_*.pt -o fused.pt.",
                    array_size, array_size == 1 ? " (" + members[0].source + ")" : ""));
  }
  std::vector<Module> modules;
  std::vector<std::string> names;
  std::vector<MemberGraph> graphs;
  for (int64_t b = 0; b < array_size; ++b) {
    modules.push_back(members[b].module);
    names.push_back(fmt::format("model {} ({})", b, members[b].source));
  }
  verifyModulesInLockstep(modules, names);
  for (int64_t b = 0; b < array_size; ++b) graphs.push_back({inlinedForward(members[b], names[b]), names[b]});
  verifyGraphsInLockstep(graphs);

  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  ClassMap classes;
  auto stack = [](const std::vector<at::Tensor>& tensors, bool is_parameter) {
    auto stacked = at::stack(tensors).detach();
    return is_parameter ? stacked.requires_grad_(tensors[0].requires_grad()) : stacked;
  };
  auto fused_name = [](const std::string& name) {
    const std::string plain = withoutMangling(name);
    return kFusedNamespace + plain.substr(plain.rfind("__torch__.", 0) == 0 ? 10 : 0);
  };
  Module fused = mirror(modules, cu, classes, fused_name, stack, true);

  const auto& tmpl = *graphs[0].graph;
  std::vector<ValueKind> input_kinds;
  for (size_t i = 0; i < tmpl.inputs().size(); ++i) {
    const bool per_member = i > 0 && containsTensor(tmpl.inputs()[i]->type()) && !options.shared_input;
    input_kinds.push_back(per_member ? ValueKind::Array : ValueKind::Uniform);
  }
  FusionResult result{fused, {}};
  auto forward = fuseMemberGraph(tmpl, array_size, input_kinds, result.report);
  retypeBlock(forward->block(), classes);
  addMethod(fused, "forward", forward);
  auto member_forward = graphs[0].graph->copy();
  retypeBlock(member_forward->block(), classes);
  addMethod(fused, kMemberForward, member_forward);

  c10::List<std::string> sources;
  for (const auto& m : members) sources.push_back(m.source);
  fused.register_attribute(kArraySizeAttr, c10::IntType::get(), array_size);
  fused.register_attribute(kSourcesAttr, c10::ListType::ofStrings(), sources);
  fused.register_attribute(kSharedInputAttr, c10::BoolType::get(), options.shared_input);
  return result;
}

bool isFused(const Module& module) {
  return module.hasattr(kArraySizeAttr) && module.find_method(kMemberForward).has_value();
}

bool sharedInput(const Module& fused) {
  return arraySize(fused) > 0 && fused.hasattr(kSharedInputAttr) && fused.attr(kSharedInputAttr).toBool();
}

int64_t arraySize(const Module& fused) {
  if (!isFused(fused)) {
    throw UserError(
        "this module was not made by hfta-fuse (it has no hfta_array_size); "
        "pass the fused .pt that hfta-fuse wrote");
  }
  return fused.attr(kArraySizeAttr).toInt();
}

Module split(const Module& fused, int64_t index) {
  const int64_t array_size = arraySize(fused);
  if (index < 0 || index >= array_size) {
    throw UserError(
        fmt::format("member index {} is out of range: this fused module has {} members "
                    "(0 to {})",
                    index, array_size, array_size - 1));
  }
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  ClassMap classes;
  auto slice = [index](const std::vector<at::Tensor>& tensors, bool is_parameter) {
    auto member = tensors[0].select(0, index).detach().clone();
    return is_parameter ? member.requires_grad_(tensors[0].requires_grad()) : member;
  };
  auto plain_name = [](const std::string& name) {
    const std::string plain = withoutMangling(name);
    const std::string prefix = kFusedNamespace;
    return plain.rfind(prefix, 0) == 0 ? "__torch__." + plain.substr(prefix.size()) : plain;
  };
  Module member = mirror({fused}, cu, classes, plain_name, slice, true);
  auto forward = fused.get_method(kMemberForward).graph()->copy();
  retypeBlock(forward->block(), classes);
  addMethod(member, "forward", forward);
  return member;
}

}  // namespace hfta
