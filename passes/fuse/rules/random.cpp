// Random ops: each member draws its own numbers, as dropout does. They draw
// one number per element, so on the [B, ...] array (or the channel-folded
// value) every member gets its own; a shared (uniform) input is expanded
// to B members first, so that members never share a draw.
//
//   %r = aten::rand_like(%x, ...)  ->  %r = aten::rand_like(%x, ...)      # x [B, ...]
//
// An in-place fill (bernoulli_, normal_, uniform_) of a per-member tensor
// runs as it is. A fill of a fresh tensor that all members share is what
// torchvision's stochastic depth draws its noise with:
//
//   noise = torch.empty(size).bernoulli_(survival_rate)
//
// with size [N, 1, 1, 1] in "row" mode (one number per sample) and
// [1, 1, 1, 1] in "batch" mode (one number for the whole batch). `empty`
// reads only uniform sizes, so its tensor is uniform; the fill gives each
// member a copy of its own first, [B, *size], so that each member draws
// one number per sample (row) or one for its whole batch (batch), and the
// fresh tensor is that copy from then on:
//
//   %n = aten::empty(%size, ...)        ->  %n = aten::empty(%size, ...)
//   %m = aten::bernoulli_(%n, %p, ...)      %e = hfta::broadcast_to_members(%n, B)
//                                           %c = aten::clone(%e, %contiguous)      # [B, *size]
//                                           %m = aten::bernoulli_(%c, %p, ...)     # Array
#include <fmt/format.h>

#include <algorithm>

#include "passes/fuse/rules/rules.h"
#include "passes/ir/walk.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

// True if the node reading `use` may keep a view of the value it reads
// (its schema gives the argument an alias set, or it has no schema).
bool mayKeepAView(const torch::jit::Use& use) {
  const auto* schema = use.user->maybeSchema();
  if (schema == nullptr || use.offset >= schema->arguments().size()) return true;
  return schema->arguments()[use.offset].alias_info() != nullptr;
}

// Why the uniform tensor `self` cannot become each member's own at `fill`,
// or nullopt. It must be fresh (made by an op that returns new memory, so
// that nothing else sees the write); what reads it after the fill must be
// in the fill's block (it then reads the members' copy), and what reads it
// before must not keep a view of it (which the fill would have written).
std::optional<std::string> whyNotOwnCopy(const Node* fill, const Value* self) {
  const auto* schema = self->node()->maybeSchema();
  if (schema == nullptr || self->node()->outputs().size() != 1 || schema->returns()[0].alias_info() != nullptr) {
    return fmt::format("it fills `{}`, which all members share and which is not a fresh tensor", self->debugName());
  }
  const Block* block = fill->owningBlock();
  for (const auto& use : self->uses()) {
    if (use.user == fill) continue;
    const Node* reader = enclosingNodeIn(use.user, block);
    if (reader == block->return_node() || (reader != nullptr && reader->isAfter(fill))) continue;
    const bool before =
        reader != nullptr || (enclosingNodeIn(fill, use.user->owningBlock()) != use.user && use.user->isBefore(fill));
    if (!before) {
      return fmt::format("`{}`, which all members share, is read after the fill outside the fill's block",
                         self->debugName());
    }
    if (mayKeepAView(use)) {
      return fmt::format("`{}`, which all members share, has a view made before the fill", self->debugName());
    }
  }
  return std::nullopt;
}

// An in-place fill: input 0 the tensor filled, `tensor_args` the inputs
// that may differ per member (bernoulli_'s probabilities), which broadcast
// against it; every other input is uniform.
RuleResult fuseFill(RuleContext& ctx, const std::vector<size_t>& tensor_args) {
  for (size_t i = 1; i < ctx.node()->inputs().size(); ++i) {
    const bool may_differ = std::find(tensor_args.begin(), tensor_args.end(), i) != tensor_args.end();
    if (ctx.kind(i) == ValueKind::PerMember || (!may_differ && ctx.kind(i) != ValueKind::Uniform)) {
      return RuleResult::decline("an argument differs per member");
    }
  }
  if (isPerMemberTensor(ctx.kind(0))) return tensor_args.empty() ? fusePerElementInPlace(ctx) : fuseBinaryInPlace(ctx);
  if (auto why = whyNotOwnCopy(ctx.node(), ctx.node()->input(0))) return RuleResult::decline(*why);
  auto* shared = ctx.array(0);  // a [B, *size] view of the one tensor
  auto* contiguous = ctx.graph().insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous));
  auto* own = ctx.insert(c10::aten::clone, {shared}, {{"memory_format", contiguous}});
  std::unordered_map<size_t, Value*> replaced{{0, own}};
  for (size_t i : tensor_args) replaced[i] = ctx.insert(kind::align(), {ctx.arrayOrBroadcast(i), own});
  Node* copy = ctx.insertCopy(replaced);
  ctx.bindOutput(0, copy->output(), ValueKind::Array);
  // What reads the shared tensor from here on reads each member's own.
  ctx.fuser().bind(ctx.node()->input(0), {copy->output(), ValueKind::Array});
  return RuleResult::fused();
}

RuleResult fuseScalarFill(RuleContext& ctx) { return fuseFill(ctx, {}); }
RuleResult fuseTensorFill(RuleContext& ctx) { return fuseFill(ctx, {/*p=*/1}); }

}  // namespace

std::vector<Rule> rules::random() {
  return {
      {"aten::rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      {"aten::randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? "
       "pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
       fusePerElement},
      // self holds the probabilities.
      {"aten::bernoulli(Tensor self, *, Generator? generator=None) -> Tensor", fusePerElement},
      {"aten::bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor", fusePerElement},
      {"aten::bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> Tensor(a!)",
       fuseScalarFill},
      {"aten::bernoulli_.Tensor(Tensor(a!) self, Tensor p, *, Generator? generator=None) -> Tensor(a!)",
       fuseTensorFill},
      {"aten::normal_(Tensor(a!) self, float mean=0., float std=1., *, Generator? generator=None) -> Tensor(a!)",
       fuseScalarFill},
      {"aten::uniform_(Tensor(a!) self, float from=0., float to=1., *, Generator? generator=None) -> Tensor(a!)",
       fuseScalarFill},
  };
}

}  // namespace hfta
