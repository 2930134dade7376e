#include "runtime/autotune.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "runtime/atomic_file.h"

namespace hfta::autotune {
namespace {

// Timed runs per candidate after the warm-up: the median of 3 shrugs off
// one run that another process on a shared machine slowed down. A
// candidate whose run takes kHopeless times the best median so far stops
// there: it will not win, and forms that lose tend to lose by far (a
// grouped convolution's weight gradient at 2.4x), so measuring costs little
// more than running the winner.
constexpr int kRepeats = 3;
constexpr double kHopeless = 3.0;

struct State {
  std::mutex mutex;
  std::optional<bool> enabled;
  std::optional<std::string> cache_path;
  bool loaded = false;
  std::map<std::string, size_t> chosen;
};

State& state() {
  static State s;
  return s;
}

std::string defaultCachePath() {
  namespace fs = std::filesystem;
  if (const char* own = std::getenv("HFTA_CACHE_DIR")) return (fs::path(own) / "forms.json").string();
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return (fs::path(xdg) / "hfta" / "forms.json").string();
  if (const char* home = std::getenv("HOME")) return (fs::path(home) / ".cache" / "hfta" / "forms.json").string();
  return "";
}

std::string pathLocked(State& s) {
  if (!s.cache_path) s.cache_path = defaultCachePath();
  return *s.cache_path;
}

nlohmann::json readCache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  auto cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : nlohmann::json::object();  // unreadable: measured anew
}

void loadLocked(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  const auto path = pathLocked(s);
  if (path.empty()) return;
  const auto cache = readCache(path);  // (items() of a temporary would dangle)
  for (const auto& [key, entry] : cache.items()) {
    if (entry.is_object() && entry.contains("form") && entry["form"].is_number_unsigned()) {
      s.chosen[key] = entry["form"].get<size_t>();
    }
  }
}

// Adds one choice to the file (re-read first: another process may have
// added its own).
void saveLocked(State& s, const std::string& key, size_t form, const std::vector<double>& seconds) {
  const auto path = pathLocked(s);
  if (path.empty()) return;
  auto cache = readCache(path);
  cache[key] = {{"form", form}, {"median_seconds", seconds}};
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    writeFileAtomically(path, cache.dump(1) + "\n");
  } catch (const std::exception&) {
    // A cache that cannot be written costs the next process a measurement.
  }
}

// The median time of `run` over kRepeats runs after a warm-up, or the time
// of the first run that is hopeless against `best` (a median already taken).
double medianSeconds(const std::function<void()>& run, std::optional<double> best) {
  using Clock = std::chrono::steady_clock;
  run();  // warm-up: first-use allocations, kernel selection
  std::vector<double> times;
  for (int r = 0; r < kRepeats; ++r) {
    const auto start = Clock::now();
    run();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    if (best && times.back() > kHopeless * *best) return times.back();
  }
  std::nth_element(times.begin(), times.begin() + kRepeats / 2, times.end());
  return times[kRepeats / 2];
}

}  // namespace

bool enabled() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.enabled) {
    const char* env = std::getenv("HFTA_AUTOTUNE");
    s.enabled = env == nullptr || std::string(env) != "0";
  }
  return *s.enabled;
}

void setEnabled(bool on) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.enabled = on;
}

std::string cachePath() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return pathLocked(s);
}

void setCachePath(const std::string& path) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.cache_path = path;
  s.loaded = false;
  s.chosen.clear();
}

void forget() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.loaded = false;
  s.chosen.clear();
}

std::string machine(bool cuda) {
  if (cuda) return "cuda";  // (the GPU's model is not told apart yet)
  static const std::string processor = [] {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return std::string("unknown processor");
  }();
  return processor;
}

size_t choose(const std::string& key, size_t heuristic, const std::vector<std::function<void()>>& candidates) {
  if (!enabled() || candidates.size() < 2) return heuristic;
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    loadLocked(s);
    const auto it = s.chosen.find(key);
    if (it != s.chosen.end() && it->second < candidates.size()) return it->second;
  }
  // Measured outside the lock: a candidate may itself call choose().
  std::vector<double> seconds;
  std::optional<size_t> fastest;
  for (size_t c = 0; c < candidates.size(); ++c) {
    double t = -1;
    try {
      t = medianSeconds(candidates[c], fastest ? std::optional(seconds[*fastest]) : std::nullopt);
    } catch (const std::exception&) {
      // A form this input cannot take is not a choice.
    }
    seconds.push_back(t);
    if (t >= 0 && (!fastest || t < seconds[*fastest])) fastest = c;
  }
  const size_t best = fastest.value_or(heuristic);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.chosen[key] = best;
  saveLocked(s, key, best, seconds);
  return best;
}

}  // namespace hfta::autotune
