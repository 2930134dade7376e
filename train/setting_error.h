#pragma once
// A training run's errors in its own terms: a bad or missing setting is
// named as the run's configuration names it (lr, max_lr, array_size), and
// each front end shows it its own way (hfta-train: `--max-lr`; a JSON
// configuration: its key).
#include <string>

#include "support/user_error.h"

namespace hfta::train {

class SettingError : public UserError {
 public:
  SettingError(std::string setting, std::string problem)
      : UserError(setting + ": " + problem), setting_(std::move(setting)), problem_(std::move(problem)) {}
  const std::string& setting() const { return setting_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string setting_, problem_;
};

}  // namespace hfta::train
