// The fusion engine on graphs whose values hold tensors inside optionals and
// tuples, and on control flow that runs per member (the cases
// lit/fuse.test shows as IR): the fused graph computes what each member's
// graph computes alone.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/torch.h>

#include "passes/fuse/graph_fuser.h"
#include "tests/test_support.h"

namespace hfta {
namespace {

using testing::allClose;

std::shared_ptr<torch::jit::Graph> parse(const std::string& ir) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, graph.get());
  return graph;
}

c10::IValue run(const std::shared_ptr<torch::jit::Graph>& graph, std::vector<c10::IValue> inputs) {
  torch::jit::GraphFunction function("f", graph->copy(), nullptr);
  return function(std::move(inputs));
}

// An early return inside a branch on each member's own data: TorchScript
// leaves the returned tuple prim::Uninitialized in a member that did not
// return, and the fused graph must not unpack it there.
TEST(FusionEngine, EarlyReturnOfATupleOnPerMemberDataTakesEachMembersPath) {
  const auto member = parse(R"IR(
graph(%x : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %s : Tensor = aten::sum(%x, %none)
  %positive : Tensor = aten::gt(%s, %zero)
  %cond : bool = aten::Bool(%positive)
  %returned : bool, %early : (Tensor, Tensor) = prim::If(%cond)
    block0():
      %n : Tensor = aten::mul(%x, %x)
      %pair : (Tensor, Tensor) = prim::TupleConstruct(%x, %n)
      -> (%true, %pair)
    block1():
      %undefined : (Tensor, Tensor) = prim::Uninitialized()
      -> (%false, %undefined)
  %out : Tensor = prim::If(%returned)
    block0():
      %a : Tensor, %b : Tensor = prim::TupleUnpack(%early)
      %sum : Tensor = aten::add(%a, %b, %one)
      -> (%sum)
    block1():
      %r : Tensor = aten::relu(%x)
      -> (%r)
  return (%out)
)IR");
  FusionReport report;
  const auto fused = fuseMemberGraph(*member, 3, {ValueKind::Array}, report);
  // Member 1 returns early, members 0 and 2 do not.
  auto x = torch::randn({3, 4, 5}).abs();
  x[0] = -x[0];
  x[2] = -x[2];
  const auto out = run(fused, {x}).toTensor();
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(allClose(out[b], run(member, {x[b]}).toTensor(), 0)) << "member " << b;
  }
}

// An optional tensor all members share joins a per-member one: broadcast.
TEST(FusionEngine, SharedOptionalTensorJoiningAnArrayIsBroadcast) {
  const auto member = parse(R"IR(
graph(%x : Tensor, %flag : bool):
  %none : NoneType = prim::Constant()
  %sizes : int[] = prim::Constant[value=[4]]()
  %z : Tensor = aten::ones(%sizes, %none, %none, %none, %none)
  %u : Tensor? = prim::If(%flag)
    block0():
      -> (%z)
    block1():
      -> (%none)
  %w : Tensor? = prim::If(%flag)
    block0():
      -> (%u)
    block1():
      -> (%x)
  %t : Tensor = prim::unchecked_cast(%w)
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::add(%t, %x, %one)
  return (%y)
)IR");
  FusionReport report;
  const auto fused = fuseMemberGraph(*member, 2, {ValueKind::Array, ValueKind::Uniform}, report);
  EXPECT_TRUE(report.fallbacks.empty()) << report.text();
  const auto x = torch::randn({2, 4});
  for (bool flag : {true, false}) {
    const auto out = run(fused, {x, flag}).toTensor();
    for (int64_t b = 0; b < 2; ++b) {
      EXPECT_TRUE(allClose(out[b], run(member, {x[b], flag}).toTensor(), 0)) << "member " << b << " flag " << flag;
    }
  }
}

// A branch on each member's own data runs per member, and reads lists of
// per-member tensors made outside it: member b of each list. A Tensor?[]
// (what aten::index takes: torchvision's Swin indexes its bias table so)
// and lists of tuples or of lists, not only Tensor[]; the first two were
// internal errors.
TEST(FusionEngine, ListsOfArraysReadInsideAPerMemberBranchAreSlicedPerMember) {
  const auto member = parse(R"IR(
graph(%x : Tensor, %i : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %indices : Tensor?[] = prim::ListConstruct(%i)
  %pair : (Tensor, Tensor) = prim::TupleConstruct(%x, %x)
  %pairs : (Tensor, Tensor)[] = prim::ListConstruct(%pair)
  %inner : Tensor[] = prim::ListConstruct(%x)
  %nested : Tensor[][] = prim::ListConstruct(%inner)
  %s : Tensor = aten::sum(%x, %none)
  %positive : Tensor = aten::gt(%s, %zero)
  %cond : bool = aten::Bool(%positive)
  %out : Tensor = prim::If(%cond)
    block0():
      %a : Tensor = aten::index(%x, %indices)
      -> (%a)
    block1():
      %p : (Tensor, Tensor) = aten::__getitem__(%pairs, %zero)
      %q : Tensor, %r : Tensor = prim::TupleUnpack(%p)
      %l : Tensor[] = aten::__getitem__(%nested, %zero)
      %t : Tensor = aten::__getitem__(%l, %zero)
      %u : Tensor = aten::add(%q, %t, %one)
      %v : Tensor = aten::index(%u, %indices)
      -> (%v)
  return (%out)
)IR");
  FusionReport report;
  const auto fused = fuseMemberGraph(*member, 3, {ValueKind::Array, ValueKind::Array}, report);
  // Members 0 and 2 take the first branch, member 1 the second.
  auto x = torch::randn({3, 5, 3}).abs();
  x[1] = -x[1];
  x.requires_grad_();
  const auto i = torch::randint(0, 5, {3, 4});
  const auto out = run(fused, {x, i}).toTensor();
  out.sum().backward();
  for (int64_t b = 0; b < 3; ++b) {
    const auto xb = x.detach()[b].clone().requires_grad_();
    const auto want = run(member, {xb, i[b]}).toTensor();
    want.sum().backward();
    EXPECT_TRUE(allClose(out[b], want, 0)) << "member " << b;
    EXPECT_TRUE(allClose(x.grad()[b], xb.grad(), 0)) << "member " << b;
  }
}

// Ops of torchvision's Swin and MaxViT (lit/fuse.test shows their IR):
// einsum with its own and a shared operand, roll, norm, the clamps, clone
// and zero_ fuse and compute what each member computes alone.
TEST(FusionEngine, SwinAndMaxVitOpsMatchEachMemberAlone) {
  const auto member = parse(R"IR(
graph(%x : Tensor, %w : Tensor, %shared : Tensor):
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %two : float = prim::Constant[value=2.]()
  %true : bool = prim::Constant[value=1]()
  %batched : str = prim::Constant[value="nij,njk->nik"]()
  %pair : Tensor[] = prim::ListConstruct(%x, %w)
  %p : Tensor = aten::einsum(%batched, %pair, %none)
  %spaced : str = prim::Constant[value="nij, jk -> nik"]()
  %with_shared : Tensor[] = prim::ListConstruct(%p, %shared)
  %q : Tensor = aten::einsum(%spaced, %with_shared, %none)
  %shifts : int[] = prim::Constant[value=[1, -2]]()
  %dims : int[] = prim::Constant[value=[1, 2]]()
  %r : Tensor = aten::roll(%q, %shifts, %dims)
  %last : int[] = prim::Constant[value=[-1]]()
  %n : Tensor = aten::norm(%r, %two, %last, %true)
  %eps : float = prim::Constant[value=0.5]()
  %c : Tensor = aten::clamp_min(%n, %eps)
  %lo : float = prim::Constant[value=-0.3]()
  %hi : float = prim::Constant[value=0.4]()
  %d : Tensor = aten::clamp(%r, %lo, %hi)
  %e : Tensor = aten::div(%d, %c)
  %f : Tensor = aten::clone(%e, %none)
  %g : Tensor = aten::zero_(%f)
  %h : Tensor = aten::add(%e, %g, %one)
  return (%h)
)IR");
  FusionReport report;
  const auto fused = fuseMemberGraph(*member, 3, {ValueKind::Array, ValueKind::Array, ValueKind::Uniform}, report);
  EXPECT_TRUE(report.fallbacks.empty()) << report.text();
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const auto x = torch::randn({3, 2, 3, 4}, options).requires_grad_();
  const auto w = torch::randn({3, 2, 4, 5}, options).requires_grad_();
  const auto shared = torch::randn({5, 6}, options);
  const auto out = run(fused, {x, w, shared}).toTensor();
  out.sum().backward();
  for (int64_t b = 0; b < 3; ++b) {
    const auto xb = x.detach()[b].clone().requires_grad_();
    const auto wb = w.detach()[b].clone().requires_grad_();
    const auto want = run(member, {xb, wb, shared}).toTensor();
    want.sum().backward();
    EXPECT_TRUE(allClose(out[b], want, 1e-12)) << "member " << b;
    EXPECT_TRUE(allClose(x.grad()[b], xb.grad(), 1e-12)) << "member " << b;
    EXPECT_TRUE(allClose(w.grad()[b], wb.grad(), 1e-12)) << "member " << b;
  }
}

// x[indices] (aten::index, Swin's and MaxViT's relative position bias):
// per-member integer indices of two ranks gather in one call, shared
// indices too; a mask and a skipped dim (None) run member by member.
TEST(FusionEngine, AdvancedIndexingPicksFromEachMembersOwnSlice) {
  const auto member = parse(R"IR(
graph(%table : Tensor, %i : Tensor, %j : Tensor, %shared : Tensor, %mask : Tensor):
  %none : NoneType = prim::Constant()
  %by_own : Tensor?[] = prim::ListConstruct(%i)
  %a : Tensor = aten::index(%table, %by_own)
  %by_two : Tensor?[] = prim::ListConstruct(%i, %j)
  %b : Tensor = aten::index(%table, %by_two)
  %by_shared : Tensor?[] = prim::ListConstruct(%shared)
  %c : Tensor = aten::index(%table, %by_shared)
  %by_mask : Tensor?[] = prim::ListConstruct(%mask)
  %d : Tensor = aten::index(%table, %by_mask)
  %skip : Tensor?[] = prim::ListConstruct(%none, %j)
  %e : Tensor = aten::index(%table, %skip)
  %out : (Tensor, Tensor, Tensor, Tensor, Tensor) = prim::TupleConstruct(%a, %b, %c, %d, %e)
  return (%out)
)IR");
  FusionReport report;
  const std::vector<ValueKind> kinds{ValueKind::Array, ValueKind::Array, ValueKind::Array, ValueKind::Uniform,
                                     ValueKind::Array};
  const auto fused = fuseMemberGraph(*member, 3, kinds, report);
  EXPECT_TRUE(report.fallbacks.empty()) << report.text();
  const auto table = torch::randn({3, 7, 3}, torch::TensorOptions().dtype(torch::kFloat64)).requires_grad_();
  const auto i = torch::randint(0, 7, {3, 4});
  const auto j = torch::randint(0, 3, {3, 2, 4});
  const auto shared = torch::randint(0, 7, {5});
  // The same number of rows picked in every member, as stacking needs.
  auto mask = torch::zeros({3, 7}, torch::kBool);
  mask.index_put_({0, torch::tensor({0, 2, 5})}, true);
  mask.index_put_({1, torch::tensor({1, 2, 3})}, true);
  mask.index_put_({2, torch::tensor({6, 4, 0})}, true);
  const auto out = run(fused, {table, i, j, shared, mask}).toTuple()->elements();
  at::Tensor total = torch::zeros({}, table.options());
  for (const auto& o : out) total = total + o.toTensor().square().sum();
  total.backward();
  for (int64_t b = 0; b < 3; ++b) {
    const auto own = table.detach()[b].clone().requires_grad_();
    const auto want = run(member, {own, i[b], j[b], shared, mask[b]}).toTuple()->elements();
    at::Tensor own_total = torch::zeros({}, own.options());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_TRUE(allClose(out[k].toTensor()[b], want[k].toTensor(), 0)) << "member " << b << " output " << k;
      own_total = own_total + want[k].toTensor().square().sum();
    }
    own_total.backward();
    EXPECT_TRUE(allClose(table.grad()[b], own.grad(), 1e-12)) << "member " << b;
  }
}

}  // namespace
}  // namespace hfta
