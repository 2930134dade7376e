#include "tune/algorithm.h"

#include <fmt/format.h>

#include <cmath>

#include "train/setting_error.h"

namespace hfta::tune {

using train::SettingError;

bool rankedBefore(double metric_a, int64_t trial_a, double metric_b, int64_t trial_b) {
  const bool nan_a = std::isnan(metric_a), nan_b = std::isnan(metric_b);
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && metric_a != metric_b) return metric_a < metric_b;
  return trial_a < trial_b;
}

std::vector<Bracket> hyperbandBrackets(int64_t max_epochs, int64_t eta) {
  int64_t s_max = 0;
  for (int64_t power = eta; power <= max_epochs; power *= eta) ++s_max;
  std::vector<Bracket> brackets;
  for (int64_t s = s_max; s >= 0; --s) {
    const auto eta_s = static_cast<int64_t>(std::llround(std::pow(eta, s)));
    const int64_t n = ((s_max + 1) * eta_s + s) / (s + 1);  // ceil((s_max + 1) eta^s / (s + 1))
    Bracket bracket{s, {}};
    for (int64_t i = 0, eta_i = 1; i <= s; ++i, eta_i *= eta) {
      const double epochs = static_cast<double>(max_epochs) * static_cast<double>(eta_i) / static_cast<double>(eta_s);
      bracket.rungs.push_back({n / eta_i, std::max<int64_t>(1, std::llround(epochs))});
    }
    brackets.push_back(std::move(bracket));
  }
  return brackets;
}

std::vector<int64_t> ashaRungEpochs(int64_t min_epochs, int64_t max_epochs, int64_t eta) {
  std::vector<int64_t> epochs;
  for (int64_t r = min_epochs; r < max_epochs; r *= eta) epochs.push_back(r);
  epochs.push_back(max_epochs);
  return epochs;
}

std::unique_ptr<Algorithm> makeAlgorithm(const AlgorithmOptions& options) {
  if (options.max_epochs < 1) {
    throw SettingError("max_epochs",
                       fmt::format("must be at least 1 (R, a trial's most epochs), got {}", options.max_epochs));
  }
  if (options.eta < 2) {
    throw SettingError("eta", fmt::format("must be a whole number of at least 2 (each rung keeps 1/eta of its "
                                          "trials), got {}",
                                          options.eta));
  }
  if (options.trials < 0) throw SettingError("trials", fmt::format("must be at least 1, got {}", options.trials));
  if (options.name == "hyperband") return makeHyperband(options);
  if (options.trials == 0) {
    throw SettingError("trials", fmt::format("{} needs the number of trials to start", options.name));
  }
  if (options.name == "random") return makeRandomSearch(options);
  if (options.name == "asha") {
    if (options.min_epochs < 1 || options.min_epochs > options.max_epochs) {
      throw SettingError("min_epochs", fmt::format("must be between 1 and --max-epochs ({}), got {}",
                                                   options.max_epochs, options.min_epochs));
    }
    return makeAsha(options);
  }
  throw SettingError("algorithm", fmt::format("is random, hyperband or asha, not {}", options.name));
}

}  // namespace hfta::tune
