// The fused optimizers (runtime/optim) for hfta.optim: made by name from
// train/optimizers.h's table, their hyper-parameters one value or one per
// member, their state dicts as bytes (bindings.h: pickled).
#include <torch/extension.h>

#include <map>
#include <string>
#include <vector>

#include "python/src/bindings.h"
#include "runtime/optim/clip.h"
#include "train/optimizers.h"

namespace py = pybind11;

namespace hfta::python {
namespace {

using Values = std::map<std::string, std::vector<double>>;

optim::Hyper hyperOf(const Values& values) {
  optim::Hyper hyper;
  for (const auto& [key, v] : values) hyper.emplace(key, PerMember(v));
  return hyper;
}

}  // namespace

void bindOptim(py::module_& m) {
  py::class_<optim::FusedOptimizer>(m, "FusedOptimizer")
      .def(py::init(
               [](const std::string& kind, std::vector<at::Tensor> params, int64_t array_size, const Values& hyper) {
                 return train::makeOptimizer(kind, std::move(params), array_size, hyperOf(hyper));
               }),
           py::arg("kind"), py::arg("params"), py::arg("array_size"), py::arg("hyper"))
      .def(
          "step",
          [](optim::FusedOptimizer& o, const std::vector<uint8_t>& skip) {
            py::gil_scoped_release released;
            o.step(skip);
          },
          py::arg("skip") = std::vector<uint8_t>{})
      .def(
          "set_hyper",
          [](optim::FusedOptimizer& o, const std::string& key, std::vector<double> v) { o.set_hyper(key, v); },
          py::arg("key"), py::arg("values"))
      .def(
          "set_scheduled_hyper",
          [](optim::FusedOptimizer& o, const std::string& key, std::vector<double> v) {
            o.set_scheduled_hyper(key, v);
          },
          py::arg("key"), py::arg("values"))
      .def("hyper",
           [](const optim::FusedOptimizer& o) {
             Values out;
             for (const auto& [key, v] : o.hyper()) out[key] = v.expanded(o.array_size());
             return out;
           })
      .def("freeze", &optim::FusedOptimizer::freeze, py::arg("member"))
      .def("frozen", &optim::FusedOptimizer::frozen, py::arg("member"))
      .def_property_readonly("array_size", &optim::FusedOptimizer::array_size)
      .def_property_readonly("kind", &optim::FusedOptimizer::name)
      .def("state_dict", [](const optim::FusedOptimizer& o) { return pickled(o.state_dict()); })
      .def(
          "load_state_dict",
          [](optim::FusedOptimizer& o, const std::string& state) { o.load_state_dict(unpickled(state)); },
          py::arg("state"));
  m.def(
      "gather_state_dicts",
      [](const std::vector<std::pair<std::string, int64_t>>& picks) {
        return pickled(optim::FusedOptimizer::gather_state_dicts(memberStates(picks)));
      },
      py::arg("picks"));
  m.def(
      "clip_grad_norm",
      [](const std::vector<at::Tensor>& params, int64_t array_size, std::vector<double> max_norm, double norm_type) {
        return optim::clip_grad_norm_per_member(params, array_size, PerMember(std::move(max_norm)), norm_type);
      },
      py::arg("params"), py::arg("array_size"), py::arg("max_norm"), py::arg("norm_type"));
  m.def(
      "clip_grad_value",
      [](const std::vector<at::Tensor>& params, int64_t array_size, std::vector<double> clip_value) {
        optim::clip_grad_value_per_member(params, array_size, PerMember(std::move(clip_value)));
      },
      py::arg("params"), py::arg("array_size"), py::arg("clip_value"));
  m.def("kinds", [] {
    std::vector<std::string> names;
    for (const auto& kind : train::optimizerKinds()) names.push_back(kind.name);
    return names;
  });
}

}  // namespace hfta::python
