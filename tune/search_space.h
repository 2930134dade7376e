#pragma once
// A search space as Ray Tune, Optuna and hyperopt users write one, in JSON:
// each setting a distribution or a fixed value.
//
//   {"lr": {"loguniform": [1e-3, 1.0]}, "momentum": {"uniform": [0.5, 0.99]},
//    "weight_decay": {"choice": [0, 1e-4, 5e-4]}, "seed": {"int": [0, 9999]},
//    "optimizer": "sgd", "batch_size": 64}
//
// Trial t's values come from its own generator (the space's seed and t), so
// a trial's settings do not depend on how many trials were drawn before it,
// on this machine or another.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hfta::tune {

// A trial's value of each setting: a number, a string or a bool.
using Settings = std::map<std::string, nlohmann::json>;

struct Distribution {
  enum class Kind { Fixed, Uniform, LogUniform, Int, Choice };
  Kind kind = Kind::Fixed;
  double low = 0, high = 0;             // Uniform, LogUniform: [low, high); Int: [low, high], both included
  std::vector<nlohmann::json> choices;  // Choice; Fixed: its one value
};

class SearchSpace {
 public:
  // SettingError naming the setting for an unknown distribution or a bad
  // range; `source` names the space in messages.
  static SearchSpace parse(const nlohmann::json& space, const std::string& source);
  static SearchSpace load(const std::string& path);

  Settings sample(int64_t trial, uint64_t seed) const;
  const std::map<std::string, Distribution>& settings() const { return settings_; }

 private:
  std::map<std::string, Distribution> settings_;
};

// A uniform double in [0, 1) from a 64-bit Mersenne twister draw: the
// standard fixes mt19937_64's output, not uniform_real_distribution's.
double unitInterval(uint64_t draw);

}  // namespace hfta::tune
