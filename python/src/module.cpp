// hfta._C: the compiler and the fused optimizers in the Python process.
// Importing it loads libhfta_runtime (linked with --no-as-needed), which
// registers the hfta:: operators that fused modules call.
#include <torch/extension.h>

#include "hfta/hfta.h"
#include "python/src/bindings.h"
#include "runtime/library_path.h"
#include "support/allocator.h"

namespace py = pybind11;

namespace hfta::python {
namespace {

// (module, report text, report JSON): the fused module as torch._C's
// ScriptModule, which the Python side wraps.
py::tuple resultTuple(const FusionResult& result) {
  return py::make_tuple(result.module, result.report.text(), result.report.json());
}

FuseOptions options(bool shared_input, bool allow_single_member, bool segment_plans) {
  FuseOptions o;
  o.shared_input = shared_input;
  o.allow_single_member = allow_single_member;
  o.segment_plans = segment_plans;
  return o;
}

}  // namespace

void bindFusion(py::module_& m) {
  m.def(
      "fuse",
      [](const std::vector<torch::jit::Module>& modules, const std::vector<std::string>& sources, bool shared_input,
         bool allow_single_member, bool segment_plans) {
        std::vector<Member> members;
        for (size_t b = 0; b < modules.size(); ++b) members.push_back({modules[b], sources.at(b)});
        const auto result = [&] {
          py::gil_scoped_release released;  // fusion matches and copies members on threads of its own
          return fuse(members, options(shared_input, allow_single_member, segment_plans));
        }();
        return resultTuple(result);
      },
      py::arg("modules"), py::arg("sources"), py::arg("shared_input"), py::arg("allow_single_member"),
      py::arg("segment_plans"));
  m.def(
      "fuse_files",
      [](const std::vector<std::string>& paths, bool shared_input, bool allow_single_member, bool segment_plans) {
        const auto result = [&] {
          py::gil_scoped_release released;
          return fuseFiles(paths, options(shared_input, allow_single_member, segment_plans));
        }();
        return resultTuple(result);
      },
      py::arg("paths"), py::arg("shared_input"), py::arg("allow_single_member"), py::arg("segment_plans"));
  m.def(
      "load_exported",
      [](const py::bytes& archive, const std::string& source, int64_t index) {
        return loadExportedMember(std::string(archive), source, index).module;
      },
      py::arg("archive"), py::arg("source"), py::arg("index"));
  m.def("split", &split, py::arg("fused"), py::arg("member"));
  m.def("array_size", &arraySize, py::arg("fused"));
  m.def("is_fused", &isFused, py::arg("module"));
  m.def("shared_input", &sharedInput, py::arg("fused"));
  m.def("runtime_library_path", &runtimeLibraryPath);
  m.def("keep_large_allocations", &keepLargeAllocations);
}

}  // namespace hfta::python

PYBIND11_MODULE(_C, m) {
  // hfta::UserError (what the tools print before exiting with code 2)
  // arrives in Python as hfta.FusionError, a ValueError.
  py::register_exception<hfta::UserError>(m, "FusionError", PyExc_ValueError).attr("__module__") = "hfta";
  hfta::python::bindFusion(m);
  auto optim = m.def_submodule("optim", "the fused optimizers");
  hfta::python::bindOptim(optim);
  hfta::python::bindSchedulers(optim);
  hfta::python::bindGradScaler(optim);
}
