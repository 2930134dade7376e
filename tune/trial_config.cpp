#include "tune/trial_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "hfta/hfta.h"
#include "train/optimizers.h"
#include "train/setting_error.h"

namespace hfta::tune {
namespace {

using train::RunConfig;
using train::SettingError;

std::string text(const nlohmann::json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

double number(const std::string& name, const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? 1.0 : 0.0;
  if (!value.is_number()) throw SettingError(name, fmt::format("takes a number, got {}", value.dump()));
  return value.get<double>();
}

int64_t whole(const std::string& name, const nlohmann::json& value) {
  const double v = number(name, value);
  if (v != std::floor(v)) throw SettingError(name, fmt::format("takes a whole number, got {}", value.dump()));
  return static_cast<int64_t>(v);
}

bool isScheduleSetting(const std::string& name) {
  for (const auto& s : train::scheduleSettings()) {
    if (s.name == name) return true;
  }
  return false;
}

}  // namespace

std::string runKey(const RunConfig& c) {
  const auto& o = c.options;
  std::vector<std::string> lists;  // list-valued settings (milestones) hold for the whole run
  for (const auto& [name, value] : c.schedule_settings) {
    if (name == "milestones") lists.push_back(fmt::format("{}", fmt::join(value.values(), ",")));
  }
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", c.dataset, c.data, c.limit, c.sequence_length,
                     c.holdout, c.optimizer, c.scheduler, o.epochs, o.batch_size, o.seed, o.same_batches, o.loss,
                     static_cast<int>(o.dtype), o.device.str(), o.amp ? static_cast<int>(*o.amp) : -1,
                     fmt::join(lists, ";"));
}

RunConfig trialConfig(const RunConfig& base, const std::string& model_template, const Settings& settings,
                      int64_t trial) {
  RunConfig c = base;
  c.array_size = 1;
  c.seeds = {static_cast<uint64_t>(trial)};
  c.model = model_template;
  for (const auto& [name, value] : settings) {
    const std::string placeholder = "{" + name + "}";
    if (const auto at = c.model.find(placeholder); at != std::string::npos) {
      c.model.replace(at, placeholder.size(), text(value));
    } else if (name == "seed") {
      c.seeds = {static_cast<uint64_t>(whole(name, value))};
    } else if (name == "optimizer" || name == "scheduler" || name == "loss" || name == "dataset" || name == "data") {
      if (!value.is_string()) throw SettingError(name, fmt::format("takes a name, got {}", value.dump()));
      (name == "optimizer"   ? c.optimizer
       : name == "scheduler" ? c.scheduler
       : name == "loss"      ? c.options.loss
       : name == "dataset"   ? c.dataset
                             : c.data) = value.get<std::string>();
    } else if (name == "batch_size") {
      c.options.batch_size = whole(name, value);
      if (c.options.batch_size < 1) throw SettingError(name, "must be at least 1");
    } else if (isScheduleSetting(name)) {
      if (value.is_array()) {
        std::vector<double> values;
        for (const auto& v : value) values.push_back(number(name, v));
        c.schedule_settings.insert_or_assign(name, PerMember(values));
      } else {
        c.schedule_settings.insert_or_assign(name, PerMember(number(name, value)));
      }
    } else {
      c.hyper.insert_or_assign(name, PerMember(number(name, value)));
    }
  }
  if (const auto open = c.model.find('{'); open != std::string::npos) {
    const auto close = c.model.find('}', open);
    throw SettingError("model",
                       fmt::format("{} has {} but the search space sets no such setting", model_template,
                                   c.model.substr(open, close == std::string::npos ? close : close - open + 1)));
  }
  // An optimizer hyper-parameter it does not have, or a bad value, fails here.
  try {
    train::makeOptimizer(c.optimizer, {at::zeros({1, 1})}, 1, c.hyper);
  } catch (const SettingError& e) {
    if (!settings.count(e.setting()) || e.problem().find("no such setting") == std::string::npos) throw;
    throw SettingError(e.setting(),
                       fmt::format("nothing takes it: {} (nor is it a schedule setting, a \"{{{}}}\" in --model, or "
                                   "one of seed, optimizer, scheduler, batch_size, loss, dataset, data)",
                                   e.problem(), e.setting()));
  }
  return c;
}

RunConfig arrayConfig(const std::vector<RunConfig>& trials) {
  RunConfig c = trials.at(0);
  c.array_size = static_cast<int64_t>(trials.size());
  c.seeds.clear();
  c.hyper.clear();
  for (const auto& t : trials) c.seeds.push_back(t.seeds.at(0));
  auto perMember = [&](auto field) {
    std::map<std::string, PerMember> merged;
    for (const auto& [name, first] : trials[0].*field) {
      if (name == "milestones") {  // the run's, not a member's
        merged.emplace(name, first);
        continue;
      }
      std::vector<double> values;
      for (const auto& t : trials) values.push_back((t.*field).at(name).at(0));
      merged.emplace(name, PerMember(values));
    }
    return merged;
  };
  c.hyper = perMember(&RunConfig::hyper);
  c.schedule_settings = perMember(&RunConfig::schedule_settings);
  return c;
}

int64_t Partition::groupOf(const RunConfig& trial) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (fits(groups_[g], trial)) {
      groups_[g].push_back(trial);
      return static_cast<int64_t>(g);
    }
  }
  groups_.push_back({trial});
  return static_cast<int64_t>(groups_.size()) - 1;
}

bool Partition::fits(const std::vector<RunConfig>& group, const RunConfig& trial) {
  const auto& first = group[0];
  if (runKey(first) != runKey(trial) || first.hyper.size() != trial.hyper.size()) return false;
  if (!fuses(first.model, trial.model)) return false;
  // The fused optimizer and schedule must take every member's values.
  auto candidate = group;
  candidate.push_back(trial);
  const auto config = arrayConfig(candidate);
  try {
    auto optimizer =
        train::makeOptimizer(config.optimizer, {at::zeros({config.array_size, 1})}, config.array_size, config.hyper);
    train::Schedule::make(config.scheduler, config.schedule_settings, *optimizer, config.options.epochs, 1);
  } catch (const UserError&) {
    return false;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

bool Partition::fuses(const std::string& model_a, const std::string& model_b) {
  if (model_a == model_b) return true;
  const auto key = std::minmax(model_a, model_b);
  const auto it = fuses_.find(key);
  if (it != fuses_.end()) return it->second;
  bool fused = true;
  try {
    fuse(loadMembers({model_a, model_b}));
  } catch (const UserError&) {
    fused = false;
  }
  return fuses_[key] = fused;
}

}  // namespace hfta::tune
