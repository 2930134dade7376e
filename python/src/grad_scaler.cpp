// The per-member loss scaler (runtime/optim/grad_scaler.h) for
// hfta.amp.GradScaler: one scale per member, stepping the C++ optimizers of
// all of an hfta.optim optimizer's parameter groups at once.
#include "runtime/optim/grad_scaler.h"

#include <torch/extension.h>

#include <vector>

#include "python/src/bindings.h"

namespace py = pybind11;

namespace hfta::python {

void bindGradScaler(py::module_& m) {
  using optim::FusedGradScaler;
  using Optimizers = std::vector<optim::FusedOptimizer*>;
  py::class_<FusedGradScaler>(m, "FusedGradScaler")
      .def(py::init([](int64_t array_size, std::vector<double> init_scale, std::vector<double> growth_factor,
                       std::vector<double> backoff_factor, std::vector<double> growth_interval) {
             optim::GradScalerOptions options;
             options.init_scale = init_scale;
             options.growth_factor = growth_factor;
             options.backoff_factor = backoff_factor;
             options.growth_interval = growth_interval;
             return std::make_unique<FusedGradScaler>(array_size, options);
           }),
           py::arg("array_size"), py::arg("init_scale"), py::arg("growth_factor"), py::arg("backoff_factor"),
           py::arg("growth_interval"))
      .def("scale", &FusedGradScaler::scale, py::arg("losses"))
      .def(
          "unscale_", [](FusedGradScaler& s, const Optimizers& o) { s.unscale_(o); }, py::arg("optimizers"))
      .def(
          "step", [](FusedGradScaler& s, const Optimizers& o) { return s.step(o); }, py::arg("optimizers"))
      .def("update", &FusedGradScaler::update)
      .def("scales", &FusedGradScaler::scales)
      .def("found_inf", &FusedGradScaler::found_inf)
      .def_property_readonly("array_size", &FusedGradScaler::array_size)
      .def("state_dict", [](const FusedGradScaler& s) { return pickled(s.state_dict()); })
      .def("load_state_dict",
           [](FusedGradScaler& s, const std::string& state) { s.load_state_dict(unpickled(state)); });
}

}  // namespace hfta::python
