#pragma once
// Names and predicates of TorchScript types that every layer reads: class
// names compared across separately scripted members, and whether a value
// of a type holds tensors (and so is stacked, sliced or checked).
#include <ATen/core/jit_type.h>

#include <string>

namespace hfta {

// A qualified name with TorchScript's per-compilation mangling
// ("___torch_mangle_7.") removed, so equal classes compare equal.
std::string withoutMangling(const std::string& name);
std::string demangledTypeName(const c10::TypePtr& type);

// True if `type` has a tensor anywhere inside (tuples, lists, optionals).
bool containsTensor(const c10::TypePtr& type);

}  // namespace hfta
