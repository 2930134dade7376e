#include "runtime/optim/schedulers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace hfta::optim {
namespace {

std::vector<double> expand(const PerMember& value, int64_t members, const std::string& what) {
  value.check(members, what);
  return value.expanded(members);
}

}  // namespace

LRScheduler::LRScheduler(FusedOptimizer& optimizer)
    : optimizer_(optimizer), base_lrs_(optimizer.lr().expanded(optimizer.array_size())) {}

void LRScheduler::start() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  last_lr_.resize(members());
  for (int64_t b = 0; b < members(); ++b) last_lr_[b] = lrAt(b, last_epoch_);
  optimizer_.set_scheduled_hyper("lr", last_lr_);
  applyOthers(last_epoch_);
}

c10::IValue LRScheduler::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("last_epoch", last_epoch_);
  d.insert("base_lrs", c10::List<double>(base_lrs_));
  return d;
}

void LRScheduler::load_state_dict(const c10::IValue& state) {
  const auto d = state.toGenericDict();
  const auto base = d.at("base_lrs").toDoubleVector();
  if (static_cast<int64_t>(base.size()) != members()) {
    throw std::invalid_argument(
        fmt::format("scheduler state for {} members, the optimizer has {}", base.size(), members()));
  }
  base_lrs_ = base;
  last_epoch_ = d.at("last_epoch").toInt() - 1;
  step();  // re-applies the learning rates of the saved epoch
}

StepLR::StepLR(FusedOptimizer& optimizer, PerMember step_size, PerMember gamma)
    : LRScheduler(optimizer),
      step_size_(expand(step_size, members(), "StepLR step_size")),
      gamma_(expand(gamma, members(), "StepLR gamma")) {
  for (double s : step_size_) {
    if (s < 1) throw std::invalid_argument("StepLR: step_size must be at least 1");
  }
  start();
}

double StepLR::lrAt(int64_t b, int64_t epoch) const {
  return base_lrs_[b] * std::pow(gamma_[b], std::floor(epoch / step_size_[b]));
}

MultiStepLR::MultiStepLR(FusedOptimizer& optimizer, std::vector<int64_t> milestones, PerMember gamma)
    : LRScheduler(optimizer),
      milestones_(std::move(milestones)),
      gamma_(expand(gamma, members(), "MultiStepLR gamma")) {
  std::sort(milestones_.begin(), milestones_.end());
  start();
}

double MultiStepLR::lrAt(int64_t b, int64_t epoch) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lrs_[b] * std::pow(gamma_[b], static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(FusedOptimizer& optimizer, PerMember gamma)
    : LRScheduler(optimizer), gamma_(expand(gamma, members(), "ExponentialLR gamma")) {
  start();
}

double ExponentialLR::lrAt(int64_t b, int64_t epoch) const {
  return base_lrs_[b] * std::pow(gamma_[b], static_cast<double>(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(FusedOptimizer& optimizer, PerMember t_max, PerMember eta_min)
    : LRScheduler(optimizer),
      t_max_(expand(t_max, members(), "CosineAnnealingLR T_max")),
      eta_min_(expand(eta_min, members(), "CosineAnnealingLR eta_min")) {
  for (double t : t_max_) {
    if (t <= 0) throw std::invalid_argument("CosineAnnealingLR: T_max must be positive");
  }
  start();
}

double CosineAnnealingLR::lrAt(int64_t b, int64_t epoch) const {
  return eta_min_[b] + (base_lrs_[b] - eta_min_[b]) * (1 + std::cos(M_PI * epoch / t_max_[b])) / 2;
}

LinearLR::LinearLR(FusedOptimizer& optimizer, PerMember start_factor, PerMember end_factor, PerMember total_iters)
    : LRScheduler(optimizer),
      start_(expand(start_factor, members(), "LinearLR start_factor")),
      end_(expand(end_factor, members(), "LinearLR end_factor")),
      total_(expand(total_iters, members(), "LinearLR total_iters")) {
  for (int64_t b = 0; b < members(); ++b) {
    if (start_[b] <= 0 || start_[b] > 1 || end_[b] < 0 || end_[b] > 1 || total_[b] < 1) {
      throw std::invalid_argument(
          fmt::format("LinearLR: member {} needs 0 < start_factor <= 1, 0 <= end_factor <= 1 and total_iters >= 1", b));
    }
  }
  start();
}

double LinearLR::lrAt(int64_t b, int64_t epoch) const {
  const double done = std::min<double>(static_cast<double>(epoch), total_[b]) / total_[b];
  return base_lrs_[b] * (start_[b] + (end_[b] - start_[b]) * done);
}

OneCycleLR::OneCycleLR(FusedOptimizer& optimizer, OneCycleOptions options)
    : LRScheduler(optimizer), options_(std::move(options)) {
  if (options_.total_steps < 1) throw std::invalid_argument("OneCycleLR: total_steps must be at least 1");
  if (options_.anneal_strategy != "cos" && options_.anneal_strategy != "linear") {
    throw std::invalid_argument("OneCycleLR: anneal_strategy must be \"cos\" or \"linear\"");
  }
  for (const auto* v : {&options_.max_lr, &options_.pct_start, &options_.base_momentum, &options_.max_momentum,
                        &options_.div_factor, &options_.final_div_factor}) {
    v->check(members(), "OneCycleLR option");
  }
  if (options_.cycle_momentum) {
    const auto& hyper = optimizer.hyper();
    momentum_key_ = hyper.count("momentum") ? "momentum" : hyper.count("beta1") ? "beta1" : "";
    if (momentum_key_.empty()) {
      throw std::invalid_argument(optimizer.name() +
                                  " has no momentum or beta1 for OneCycleLR to cycle; "
                                  "pass cycle_momentum = false");
    }
  }
  start();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "linear") return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
}

double OneCycleLR::phaseValue(int64_t b, int64_t step, double initial, double peak, double last) const {
  // The cycle has total_steps learning rates: epochs 0 .. total_steps - 1.
  // As torch, one step more is allowed: it extrapolates the last phase past
  // the end of the cycle (to a negative rate with anneal_strategy "linear").
  if (step > options_.total_steps) {
    throw std::out_of_range(
        fmt::format("OneCycleLR: step {} is past the cycle of total_steps = {}", step, options_.total_steps));
  }
  const double warmup_end = options_.pct_start.at(b) * static_cast<double>(options_.total_steps) - 1;
  const double total_end = static_cast<double>(options_.total_steps) - 1;
  if (step <= warmup_end) return anneal(initial, peak, step / warmup_end);
  return anneal(peak, last, (step - warmup_end) / (total_end - warmup_end));
}

double OneCycleLR::lrAt(int64_t b, int64_t epoch) const {
  const double initial = options_.max_lr.at(b) / options_.div_factor.at(b);
  return phaseValue(b, epoch, initial, options_.max_lr.at(b), initial / options_.final_div_factor.at(b));
}

void OneCycleLR::applyOthers(int64_t epoch) {
  if (momentum_key_.empty()) return;
  std::vector<double> momentum(members());
  for (int64_t b = 0; b < members(); ++b) {
    momentum[b] =
        phaseValue(b, epoch, options_.max_momentum.at(b), options_.base_momentum.at(b), options_.max_momentum.at(b));
  }
  optimizer_.set_scheduled_hyper(momentum_key_, momentum);
}

ReduceLROnPlateau::ReduceLROnPlateau(FusedOptimizer& optimizer, PlateauOptions options)
    : optimizer_(optimizer), options_(std::move(options)) {
  const int64_t b = optimizer.array_size();
  if (options_.mode != "min" && options_.mode != "max") {
    throw std::invalid_argument("ReduceLROnPlateau: mode must be \"min\" or \"max\"");
  }
  if (options_.threshold_mode != "rel" && options_.threshold_mode != "abs") {
    throw std::invalid_argument("ReduceLROnPlateau: threshold_mode must be \"rel\" or \"abs\"");
  }
  for (const auto* v :
       {&options_.factor, &options_.patience, &options_.threshold, &options_.cooldown, &options_.min_lr}) {
    v->check(b, "ReduceLROnPlateau option");
  }
  for (int64_t m = 0; m < b; ++m) {
    if (options_.factor.at(m) >= 1) throw std::invalid_argument("ReduceLROnPlateau: factor must be below 1");
  }
  const double worst =
      options_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  best_.assign(b, worst);
  bad_epochs_.assign(b, 0);
  cooldown_left_.assign(b, 0);
}

bool ReduceLROnPlateau::isBetter(int64_t b, double current) const {
  const double t = options_.threshold.at(b), best = best_[b];
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") return current < (rel ? best * (1 - t) : best - t);
  return current > (rel ? best * (t + 1) : best + t);
}

void ReduceLROnPlateau::step(const std::vector<double>& metrics) {
  const int64_t members = optimizer_.array_size();
  if (static_cast<int64_t>(metrics.size()) != members) {
    throw std::invalid_argument(fmt::format("ReduceLROnPlateau: {} metrics for {} members", metrics.size(), members));
  }
  ++last_epoch_;
  auto lr = optimizer_.lr().expanded(members);
  for (int64_t b = 0; b < members; ++b) {
    if (isBetter(b, metrics[b])) {
      best_[b] = metrics[b];
      bad_epochs_[b] = 0;
    } else {
      ++bad_epochs_[b];
    }
    if (cooldown_left_[b] > 0) {
      --cooldown_left_[b];
      bad_epochs_[b] = 0;
    }
    if (bad_epochs_[b] > options_.patience.at(b)) {
      const double reduced = std::max(lr[b] * options_.factor.at(b), options_.min_lr.at(b));
      if (lr[b] - reduced > options_.eps) lr[b] = reduced;
      cooldown_left_[b] = static_cast<int64_t>(options_.cooldown.at(b));
      bad_epochs_[b] = 0;
    }
  }
  optimizer_.set_scheduled_hyper("lr", lr);
}

c10::IValue ReduceLROnPlateau::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("last_epoch", last_epoch_);
  d.insert("best", c10::List<double>(best_));
  d.insert("bad_epochs", c10::List<int64_t>(bad_epochs_));
  d.insert("cooldown_left", c10::List<int64_t>(cooldown_left_));
  return d;
}

void ReduceLROnPlateau::load_state_dict(const c10::IValue& state) {
  const auto d = state.toGenericDict();
  auto best = d.at("best").toDoubleVector();
  if (best.size() != best_.size()) throw std::invalid_argument("ReduceLROnPlateau: state for another array size");
  best_ = std::move(best);
  bad_epochs_ = d.at("bad_epochs").toIntVector();
  cooldown_left_ = d.at("cooldown_left").toIntVector();
  last_epoch_ = d.at("last_epoch").toInt();
}

c10::IValue gatherSchedulerStates(const std::vector<MemberOfState>& picks) {
  return gatherListDict(picks, {"last_epoch"});
}

}  // namespace hfta::optim
