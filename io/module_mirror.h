#pragma once
// A module rebuilt class by class with its tensors made anew: how hfta::fuse
// builds the fused module (each tensor stacked from the members') and
// hfta::split gives a member back (each tensor a slice of the fused one).
#include <torch/script.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

namespace hfta {

// Each class of the source module -> its class in the new module.
using ClassMap = std::unordered_map<c10::ClassTypePtr, c10::ClassTypePtr>;
// Makes the new module's tensor from the source module's tensor at one slot.
using TensorMaker = std::function<at::Tensor(const at::Tensor&)>;

// The new module's tensors, one per source tensor: a tensor the source
// holds in several slots (a tied weight, a list of parameters) is one
// tensor in the new module too, so its uses share one gradient.
class TensorMemo {
 public:
  explicit TensorMemo(TensorMaker make) : make_(std::move(make)) {}
  at::Tensor operator()(const at::Tensor& source) {
    if (!source.defined()) return source;
    auto [it, fresh] = made_.emplace(source.unsafeGetTensorImpl(), at::Tensor());
    if (fresh) it->second = make_(source);
    return it->second;
  }

 private:
  TensorMaker make_;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> made_;
};

// Builds a module mirroring `source` in `cu`, its classes named by
// `class_name`, with tensors from `tensors` and the other attributes
// copied; at the root, a fused module's own record (hfta_*) is left out.
// UserError for an attribute that holds tensors inside another type.
torch::jit::Module mirror(const torch::jit::Module& source, const std::shared_ptr<torch::jit::CompilationUnit>& cu,
                          ClassMap& classes, const std::function<std::string(const std::string&)>& class_name,
                          TensorMemo& tensors, bool is_root);

// Values of the source's classes in `graph` take the new module's classes.
void retypeGraph(torch::jit::Graph& graph, const ClassMap& classes);

// Adds `graph` to `module`'s class as the method `name`.
void addMethod(torch::jit::Module& module, const std::string& name, const std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace hfta
