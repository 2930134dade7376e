#include "passes/fuse/linear_log_softmax.h"

#include <torch/csrc/jit/ir/constants.h>

#include "passes/ir/walk.h"
#include "runtime/ops/op_kinds.h"

namespace hfta {
namespace {

// Whether `node` is a log-softmax over the last dimension, in its input's
// dtype, of an hfta::linear output that nothing else reads.
bool readsLinearAlone(const torch::jit::Node* node) {
  if (!node->matches("aten::log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")) return false;
  const torch::jit::Value* scores = node->input(0);
  if (scores->node()->kind() != kind::linear() || scores->uses().size() != 1) return false;
  const auto dim = torch::jit::constant_as<int64_t>(node->input(1));
  const auto dtype = torch::jit::toIValue(node->input(2));
  return dim == -1 && dtype && dtype->isNone();
}

}  // namespace

void chainLinearLogSoftmax(torch::jit::Block* block) {
  forEachNode(block, [](torch::jit::Node* node) {
    if (!readsLinearAlone(node)) return;
    torch::jit::Node* linear = node->input(0)->node();
    torch::jit::Graph* graph = node->owningGraph();
    torch::jit::Node* chained = graph->create(kind::linear_log_softmax(), linear->inputs());
    chained->insertBefore(node);
    chained->setSourceRange(node->sourceRange());
    chained->output()->copyMetadata(node->output());
    node->output()->replaceAllUsesWith(chained->output());
    node->destroy();
    // (The walk has passed the linear too: it defines the node's input.)
    linear->destroy();
  });
}

}  // namespace hfta
