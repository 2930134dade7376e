#include "tune/search_space.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <random>

#include "train/setting_error.h"

namespace hfta::tune {
namespace {

using train::SettingError;

constexpr const char* kKinds = "uniform, loguniform, int or choice";

std::pair<double, double> range(const std::string& name, const std::string& kind, const nlohmann::json& bounds) {
  if (!bounds.is_array() || bounds.size() != 2 || !bounds[0].is_number() || !bounds[1].is_number()) {
    throw SettingError(name, fmt::format("{} takes [low, high], got {}", kind, bounds.dump()));
  }
  const double low = bounds[0].get<double>(), high = bounds[1].get<double>();
  if (!(low <= high)) throw SettingError(name, fmt::format("{}: low {} is above high {}", kind, low, high));
  return {low, high};
}

Distribution parseOne(const std::string& name, const nlohmann::json& spec) {
  Distribution d;
  if (!spec.is_object()) {
    if (!spec.is_number() && !spec.is_string() && !spec.is_boolean()) {
      throw SettingError(name, fmt::format("a fixed value is a number, a string or a bool, got {}", spec.dump()));
    }
    d.choices = {spec};
    return d;
  }
  if (spec.size() != 1) {
    throw SettingError(name, fmt::format("give one distribution ({}), e.g. {{\"loguniform\": [1e-4, 0.1]}}, got {}",
                                         kKinds, spec.dump()));
  }
  const auto& [kind, args] = *spec.items().begin();
  if (kind == "choice") {
    if (!args.is_array() || args.empty()) throw SettingError(name, "choice takes a non-empty list of values");
    d.kind = Distribution::Kind::Choice;
    d.choices = args.get<std::vector<nlohmann::json>>();
    return d;
  }
  if (kind == "uniform") {
    d.kind = Distribution::Kind::Uniform;
  } else if (kind == "loguniform") {
    d.kind = Distribution::Kind::LogUniform;
  } else if (kind == "int") {
    d.kind = Distribution::Kind::Int;
  } else {
    throw SettingError(name, fmt::format("unknown distribution \"{}\": use {}", kind, kKinds));
  }
  std::tie(d.low, d.high) = range(name, kind, args);
  if (d.kind == Distribution::Kind::LogUniform && d.low <= 0) {
    throw SettingError(name, fmt::format("loguniform needs low > 0, got {}", d.low));
  }
  if (d.kind == Distribution::Kind::Int && (d.low != std::floor(d.low) || d.high != std::floor(d.high))) {
    throw SettingError(name, fmt::format("int takes whole bounds, got {}", args.dump()));
  }
  return d;
}

}  // namespace

double unitInterval(uint64_t draw) { return static_cast<double>(draw >> 11) * 0x1.0p-53; }

SearchSpace SearchSpace::parse(const nlohmann::json& space, const std::string& source) {
  if (!space.is_object() || space.empty()) {
    throw UserError(
        fmt::format("{}: a search space is a JSON object of settings, e.g. {{\"lr\": {{\"loguniform\": "
                    "[1e-3, 1]}}}}",
                    source));
  }
  SearchSpace parsed;
  for (const auto& [name, spec] : space.items()) parsed.settings_[name] = parseOne(name, spec);
  return parsed;
}

SearchSpace SearchSpace::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("cannot read the search space {}", path));
  nlohmann::json space;
  try {
    space = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(fmt::format("{} is not valid JSON: {}", path, e.what()));
  }
  return parse(space, path);
}

Settings SearchSpace::sample(int64_t trial, uint64_t seed) const {
  // One generator per trial; settings draw in name order, one draw each.
  std::mt19937_64 generator(seed * 1000003ULL + static_cast<uint64_t>(trial));
  Settings values;
  for (const auto& [name, d] : settings_) {
    const double u = unitInterval(generator());
    switch (d.kind) {
      case Distribution::Kind::Fixed:
        values[name] = d.choices[0];
        break;
      case Distribution::Kind::Uniform:
        values[name] = d.low + u * (d.high - d.low);
        break;
      case Distribution::Kind::LogUniform:
        values[name] = std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low)));
        break;
      case Distribution::Kind::Int:
        values[name] = static_cast<int64_t>(d.low + std::floor(u * (d.high - d.low + 1)));
        break;
      case Distribution::Kind::Choice:
        values[name] = d.choices[static_cast<size_t>(u * static_cast<double>(d.choices.size()))];
        break;
    }
  }
  return values;
}

}  // namespace hfta::tune
