#include "train/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "support/user_error.h"
#include "train/setting_error.h"

namespace hfta::train {

const std::vector<ScheduleSetting>& scheduleSettings() {
  static const std::vector<ScheduleSetting> settings{
      {"step_size", "step: epochs between decays (default 10)"},
      {"gamma", "step, multistep (default 0.1), exponential (required): the decay factor"},
      {"milestones", "multistep: the epochs at which the rate decays (shared by all members)"},
      {"t_max", "cosine: epochs of the half cycle (default: epochs)"},
      {"eta_min", "cosine: the lowest rate (default 0)"},
      {"start_factor", "linear: the first epoch's fraction of the rate (default 1/3)"},
      {"end_factor", "linear: the fraction reached at total_iters (default 1)"},
      {"total_iters", "linear: epochs to go from start to end factor (default 5)"},
      {"max_lr", "onecycle: the peak rate (default: lr)"},
      {"pct_start", "onecycle: the fraction of the steps spent warming up (default 0.3)"},
      {"div_factor", "onecycle: the first rate is max_lr / div_factor (default 25)"},
      {"final_div_factor", "onecycle: the last rate is that / final_div_factor (default 1e4)"},
      {"factor", "plateau: the decay factor (default 0.1)"},
      {"patience", "plateau: epochs without improvement of the held-out loss before a decay (default 10)"},
      {"threshold", "plateau: the relative improvement that counts (default 1e-4)"},
      {"cooldown", "plateau: epochs to wait after a decay (default 0)"},
      {"min_lr", "plateau: the lowest rate (default 0)"},
  };
  return settings;
}

namespace {

// The settings of one policy: get() marks what the policy read, and
// finish() rejects the rest (a setting that would silently do nothing).
class Settings {
 public:
  Settings(const std::map<std::string, PerMember>& given, std::string policy, int64_t members)
      : given_(given), policy_(std::move(policy)), members_(members) {}
  // One value or one per member (milestones: any number).
  PerMember get(const std::string& name, PerMember fallback) {
    used_.insert(name);
    const auto it = given_.find(name);
    if (it == given_.end()) return fallback;
    const auto count = static_cast<int64_t>(it->second.values().size());
    if (name != "milestones" && count != 1 && count != members_) {
      throw SettingError(name, fmt::format("has {} values but the array has {} members (the {} schedule): give "
                                           "one value for all members or one per member",
                                           count, members_, policy_));
    }
    return it->second;
  }
  bool has(const std::string& name) const { return given_.count(name) != 0; }
  void finish() const {
    for (const auto& [name, value] : given_) {
      if (!used_.count(name)) {
        throw SettingError(name, fmt::format("is not a setting of the {} schedule", policy_));
      }
    }
  }

 private:
  const std::map<std::string, PerMember>& given_;
  std::string policy_;
  int64_t members_;
  std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<Schedule> Schedule::make(const std::string& name, const std::map<std::string, PerMember>& given,
                                         optim::FusedOptimizer& optimizer, int64_t epochs, int64_t batches_per_epoch) {
  Settings settings(given, name, optimizer.array_size());
  auto schedule = std::make_unique<Schedule>();
  schedule->name_ = name;
  try {
    if (name == "none") {
      settings.finish();
      return nullptr;
    } else if (name == "step") {
      schedule->scheduler_ =
          std::make_unique<optim::StepLR>(optimizer, settings.get("step_size", 10.0), settings.get("gamma", 0.1));
    } else if (name == "multistep") {
      if (!settings.has("milestones"))
        throw SettingError("milestones", "the multistep schedule needs them (e.g. 30,60)");
      // Named: a range-for over get(...).values() would iterate the
      // temporary PerMember after it is destroyed.
      const PerMember given_milestones = settings.get("milestones", 0.0);
      std::vector<int64_t> milestones;
      for (double m : given_milestones.values()) milestones.push_back(static_cast<int64_t>(m));
      schedule->scheduler_ = std::make_unique<optim::MultiStepLR>(optimizer, milestones, settings.get("gamma", 0.1));
    } else if (name == "exponential") {
      if (!settings.has("gamma")) throw SettingError("gamma", "the exponential schedule needs it");
      schedule->scheduler_ = std::make_unique<optim::ExponentialLR>(optimizer, settings.get("gamma", 0.0));
    } else if (name == "cosine") {
      schedule->scheduler_ = std::make_unique<optim::CosineAnnealingLR>(
          optimizer, settings.get("t_max", static_cast<double>(epochs)), settings.get("eta_min", 0.0));
    } else if (name == "linear") {
      schedule->scheduler_ =
          std::make_unique<optim::LinearLR>(optimizer, settings.get("start_factor", 1.0 / 3),
                                            settings.get("end_factor", 1.0), settings.get("total_iters", 5.0));
    } else if (name == "onecycle") {
      optim::OneCycleOptions options;
      options.max_lr = settings.get("max_lr", optimizer.lr());
      options.total_steps = epochs * batches_per_epoch;
      options.pct_start = settings.get("pct_start", options.pct_start);
      options.div_factor = settings.get("div_factor", options.div_factor);
      options.final_div_factor = settings.get("final_div_factor", options.final_div_factor);
      // As torch, with momentum cycled where the optimizer has one.
      options.cycle_momentum = optimizer.hyper().count("momentum") || optimizer.hyper().count("beta1");
      schedule->scheduler_ = std::make_unique<optim::OneCycleLR>(optimizer, options);
      schedule->per_batch_steps_ = options.total_steps;
    } else if (name == "plateau") {
      optim::PlateauOptions options;  // on the held-out loss: lower is better
      options.factor = settings.get("factor", options.factor);
      options.patience = settings.get("patience", options.patience);
      options.threshold = settings.get("threshold", options.threshold);
      options.cooldown = settings.get("cooldown", options.cooldown);
      options.min_lr = settings.get("min_lr", options.min_lr);
      schedule->plateau_ = std::make_unique<optim::ReduceLROnPlateau>(optimizer, options);
    } else {
      throw SettingError(
          "scheduler",
          fmt::format(
              "unknown schedule {}: use none, step, multistep, exponential, cosine, linear, onecycle or plateau",
              name));
    }
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("the {} schedule: {}", name, e.what()));
  }
  settings.finish();
  return schedule;
}

void Schedule::afterBatch() {
  // The step after the run's last batch would set a rate no batch uses, one
  // past OneCycleLR's cycle.
  if (per_batch_steps_ > 0 && scheduler_->last_epoch() + 1 < per_batch_steps_) scheduler_->step();
}

void Schedule::afterEpoch(const std::vector<double>& heldout_loss) {
  if (plateau_) {
    plateau_->step(heldout_loss);
  } else if (per_batch_steps_ == 0) {
    scheduler_->step();
  }
}

c10::IValue Schedule::state_dict() const {
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("policy", name_);
  state.insert("state", plateau_ ? plateau_->state_dict() : scheduler_->state_dict());
  return state;
}

void Schedule::load_state_dict(const c10::IValue& saved) {
  const auto state = saved.toGenericDict();
  const auto policy = state.at("policy").toStringRef();
  if (policy != name_) {
    throw SettingError("scheduler",
                       fmt::format("the checkpoint was saved with the {} schedule, not {}", policy, name_));
  }
  if (plateau_) {
    plateau_->load_state_dict(state.at("state"));
  } else {
    scheduler_->load_state_dict(state.at("state"));
  }
}

c10::IValue Schedule::gatherStates(const std::vector<MemberOfState>& picks) {
  std::vector<MemberOfState> inner;
  for (const auto& pick : picks) inner.push_back({pick.state.toGenericDict().at("state"), pick.member});
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("policy", sameEntry(picks, "policy", "schedules"));
  state.insert("state", optim::gatherSchedulerStates(inner));
  return state;
}

}  // namespace hfta::train
