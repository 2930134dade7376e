// The per-member learning-rate schedulers (runtime/optim/schedulers.h) for
// hfta.optim.lr_scheduler: each made over one fused optimizer (a parameter
// group's), which it must not outlive; their state dicts as bytes in
// torch.save's format, as the optimizers' are.
#include "runtime/optim/schedulers.h"

#include <torch/extension.h>

#include <memory>
#include <string>
#include <vector>

#include "python/src/bindings.h"

namespace py = pybind11;

namespace hfta::python {
namespace {

using optim::FusedOptimizer;
using Values = std::vector<double>;
using Scheduler = std::unique_ptr<optim::LRScheduler>;

// A factory keeps its optimizer alive as long as the scheduler it returns.
template <typename Factory>
void defScheduler(py::module_& m, const char* name, Factory factory) {
  m.def(name, factory, py::keep_alive<0, 1>());
}

}  // namespace

void bindSchedulers(py::module_& m) {
  py::class_<optim::LRScheduler>(m, "LRScheduler")
      .def("step", &optim::LRScheduler::step)
      .def("last_lr", &optim::LRScheduler::last_lr)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch)
      .def("state_dict", [](const optim::LRScheduler& s) { return pickled(s.state_dict()); })
      .def("load_state_dict",
           [](optim::LRScheduler& s, const std::string& state) { s.load_state_dict(unpickled(state)); });
  defScheduler(m, "step_lr", [](FusedOptimizer& o, Values step_size, Values gamma) -> Scheduler {
    return std::make_unique<optim::StepLR>(o, step_size, gamma);
  });
  defScheduler(m, "multi_step_lr", [](FusedOptimizer& o, std::vector<int64_t> milestones, Values gamma) -> Scheduler {
    return std::make_unique<optim::MultiStepLR>(o, std::move(milestones), gamma);
  });
  defScheduler(m, "exponential_lr", [](FusedOptimizer& o, Values gamma) -> Scheduler {
    return std::make_unique<optim::ExponentialLR>(o, gamma);
  });
  defScheduler(m, "cosine_annealing_lr", [](FusedOptimizer& o, Values t_max, Values eta_min) -> Scheduler {
    return std::make_unique<optim::CosineAnnealingLR>(o, t_max, eta_min);
  });
  defScheduler(m, "linear_lr", [](FusedOptimizer& o, Values start, Values end, Values total) -> Scheduler {
    return std::make_unique<optim::LinearLR>(o, start, end, total);
  });
  defScheduler(m, "one_cycle_lr",
               [](FusedOptimizer& o, Values max_lr, int64_t total_steps, Values pct_start, const std::string& anneal,
                  bool cycle_momentum, Values base_momentum, Values max_momentum, Values div_factor,
                  Values final_div_factor) -> Scheduler {
                 optim::OneCycleOptions options;
                 options.max_lr = max_lr;
                 options.total_steps = total_steps;
                 options.pct_start = pct_start;
                 options.anneal_strategy = anneal;
                 options.cycle_momentum = cycle_momentum;
                 options.base_momentum = base_momentum;
                 options.max_momentum = max_momentum;
                 options.div_factor = div_factor;
                 options.final_div_factor = final_div_factor;
                 return std::make_unique<optim::OneCycleLR>(o, options);
               });
  m.def(
      "gather_scheduler_states",
      [](const std::vector<std::pair<std::string, int64_t>>& picks) {
        return pickled(optim::gatherSchedulerStates(memberStates(picks)));
      },
      py::arg("picks"));
  py::class_<optim::ReduceLROnPlateau>(m, "ReduceLROnPlateau")
      .def(py::init([](FusedOptimizer& o, const std::string& mode, Values factor, Values patience, Values threshold,
                       const std::string& threshold_mode, Values cooldown, Values min_lr, double eps) {
             optim::PlateauOptions options;
             options.mode = mode;
             options.factor = factor;
             options.patience = patience;
             options.threshold = threshold;
             options.threshold_mode = threshold_mode;
             options.cooldown = cooldown;
             options.min_lr = min_lr;
             options.eps = eps;
             return std::make_unique<optim::ReduceLROnPlateau>(o, options);
           }),
           py::keep_alive<1, 2>())
      .def("step", &optim::ReduceLROnPlateau::step, py::arg("metrics"))
      .def("state_dict", [](const optim::ReduceLROnPlateau& s) { return pickled(s.state_dict()); })
      .def("load_state_dict",
           [](optim::ReduceLROnPlateau& s, const std::string& state) { s.load_state_dict(unpickled(state)); });
}

}  // namespace hfta::python
