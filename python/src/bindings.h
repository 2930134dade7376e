#pragma once
// The parts of hfta._C, each binding one library's interface.
#include <pybind11/pybind11.h>

namespace hfta::python {

void bindFusion(pybind11::module_& m);  // hfta.fuse, split, ...
void bindOptim(pybind11::module_& m);   // the fused optimizers behind hfta.optim

}  // namespace hfta::python
