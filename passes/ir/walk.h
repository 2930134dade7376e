#pragma once
// Walks over a block and the blocks nested in its nodes (the bodies of
// prim::If and prim::Loop), the one recursion every analysis here needs.
#include <torch/csrc/jit/ir/ir.h>

namespace hfta {

// fn(node) for every node of `block`, the nodes of a node's own blocks
// before the node. fn may remove the node it is given (the walk has moved
// past it, and past its blocks) but no other.
template <typename Fn>
void forEachNode(torch::jit::Block* block, const Fn& fn) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    torch::jit::Node* node = *it++;
    for (torch::jit::Block* inner : node->blocks()) forEachNode(inner, fn);
    fn(node);
  }
}

// The node of `block` that `node` is or is nested in; nullptr if `node` is
// outside `block`.
inline const torch::jit::Node* enclosingNodeIn(const torch::jit::Node* node, const torch::jit::Block* block) {
  while (node != nullptr && node->owningBlock() != block) node = node->owningBlock()->owningNode();
  return node;
}

// Whether pred(node) holds for some node of `block` or of its nested blocks.
template <typename Pred>
bool anyNode(const torch::jit::Block* block, const Pred& pred) {
  for (const torch::jit::Node* node : block->nodes()) {
    if (pred(node)) return true;
    for (const torch::jit::Block* inner : node->blocks()) {
      if (anyNode(inner, pred)) return true;
    }
  }
  return false;
}

}  // namespace hfta
