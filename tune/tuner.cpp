#include "tune/tuner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "hfta/io.h"
#include "run/fresh_members.h"
#include "support/atomic_file.h"
#include "train/setting_error.h"
#include "tune/tune_report.h"

namespace hfta::tune {
namespace {

namespace fs = std::filesystem;

nlohmann::json rowToJson(const train::MemberEpoch& r) {
  return {r.member, r.epoch,   r.train_loss, r.heldout_loss, r.heldout_accuracy,
          r.lr,     r.seconds, r.diverged,   r.train_seconds};
}

train::MemberEpoch rowFromJson(const nlohmann::json& j) {
  train::MemberEpoch r;
  r.member = j.at(0).get<int64_t>();
  r.epoch = j.at(1).get<int64_t>();
  r.train_loss = j.at(2).get<double>();
  r.heldout_loss = j.at(3).get<double>();
  r.heldout_accuracy = j.at(4).get<double>();
  r.lr = j.at(5).get<double>();
  r.seconds = j.at(6).get<double>();
  r.diverged = j.at(7).get<bool>();
  r.train_seconds = j.at(8).get<double>();
  return r;
}

// n jobs in arrays of at most `size`: as few arrays as that allows, of
// sizes that differ by one at most.
std::vector<std::vector<int64_t>> balanced(const std::vector<int64_t>& trials, int64_t size) {
  const auto n = static_cast<int64_t>(trials.size());
  const int64_t arrays = (n + size - 1) / size;
  std::vector<std::vector<int64_t>> out;
  for (int64_t a = 0, next = 0; a < arrays; ++a) {
    const int64_t take = n / arrays + (a < n % arrays ? 1 : 0);
    out.emplace_back(trials.begin() + next, trials.begin() + next + take);
    next += take;
  }
  return out;
}

std::string checkpointOf(const std::string& out, int64_t array) { return fmt::format("{}/arrays/{}", out, array); }

// "array   3 (bracket 1, rung 0): 2 trials [4 5], epochs 0 -> 1"
std::string describe(const ArrayRecord& array) {
  return fmt::format("array {:>3} (bracket {}, rung {}): {} trial{} [{}], epochs {} -> {}", array.id, array.bracket,
                     array.rung, array.trials.size(), array.trials.size() == 1 ? "" : "s", fmt::join(array.trials, " "),
                     array.from_epochs, array.to_epochs);
}

// The arrays the journal records as finished, by number; a torn last line
// (a crash mid-write) left out.
std::map<int64_t, nlohmann::json> readJournal(const std::string& path) {
  std::map<int64_t, nlohmann::json> arrays;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto entry = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (entry.is_object() && entry.contains("array")) arrays[entry["array"].get<int64_t>()] = entry;
  }
  return arrays;
}

}  // namespace

Tuner::Tuner(TuneOptions options) : options_(std::move(options)) {
  algorithm_ = makeAlgorithm(options_.algorithm);
  if (options_.max_array_size < 1) throw train::SettingError("max_array_size", "must be at least 1");
  options_.run.options.epochs = options_.algorithm.max_epochs;  // schedules span R epochs
  // The settings and the model are checked before anything trains: trial
  // 0's, and that fresh members of its model can be made (its layers
  // re-initialized as PyTorch's are).
  const auto& model = trial(0).config.model;
  try {
    train::reinitialized(loadMembers({model})[0].module, 0);
  } catch (const train::SettingError& e) {
    throw UserError(fmt::format("{}: {}", model, e.problem()));
  }
  fs::create_directories(fs::path(options_.out) / "arrays");
  journal_ = readJournal((fs::path(options_.out) / "journal.jsonl").string());
}

double Tuner::metric(const train::MemberEpoch& row) const {
  if (row.diverged || !std::isfinite(row.heldout_loss)) return std::nan("");
  return options_.rank_by == train::RankBy::HeldOutLoss ? row.heldout_loss : -row.heldout_accuracy;
}

TrialRecord& Tuner::trial(int64_t id) {
  auto it = trials_.find(id);
  if (it != trials_.end()) return it->second;
  TrialRecord record;
  record.id = id;
  record.settings = options_.parsed_space.sample(id, options_.seed);
  try {
    record.config = trialConfig(options_.run, options_.model, record.settings, id);
  } catch (const train::SettingError& e) {
    if (!record.settings.count(e.setting())) throw;  // a flag's (--model)
    throw UserError(fmt::format("{}: setting \"{}\" (trial {}: {}): {}", options_.space, e.setting(), id,
                                record.settings.at(e.setting()).dump(), e.problem()));
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: trial {}: {}", options_.space, id, e.what()));
  }
  record.group = partition_.groupOf(record.config);
  return trials_.emplace(id, std::move(record)).first->second;
}

int64_t Tuner::arraySizeOf(int64_t group) {
  if (options_.array_size > 0) return std::min(options_.array_size, options_.max_array_size);
  auto it = plans_.find(group);
  if (it == plans_.end()) {
    const TrialRecord* first = nullptr;
    for (const auto& [id, t] : trials_) {
      if (t.group == group) {
        first = &t;
        break;
      }
    }
    if (options_.pool == nullptr) {
      it = plans_.emplace(group, planArraySize(first->config, options_.max_array_size, options_.plan_cache)).first;
    } else {
      // Every worker plans the same arrays: rank 0 measures, the others take its size.
      ArrayPlan plan;
      plan.array_size = options_.pool->fromRankZero(fmt::format("array_size/{}", group), [&] {
        plan = planArraySize(first->config, options_.max_array_size, options_.plan_cache);
        return plan.array_size;
      });
      it = plans_.emplace(group, plan).first;
    }
  }
  return it->second.array_size;
}

bool Tuner::run(const Log& log, const std::function<bool()>& stop) {
  // The algorithm asks for as many jobs as the first group's arrays hold.
  const int64_t first_group = trial(0).group;
  const int64_t array_size = arraySizeOf(first_group);
  // Over W workers, W arrays' worth at a time (Hyperband hands out whole
  // rungs whatever the capacity; random search starts the same trials in
  // the same arrays; ASHA promotes as ASHA with W workers does).
  const int64_t capacity = array_size * (options_.pool != nullptr ? options_.pool->size() : 1);
  if (const auto plan = plans_.find(first_group); plan != plans_.end()) {  // measured, not given
    std::vector<std::string> rates;
    for (const auto& m : plan->second.measured) {
      rates.push_back(fmt::format("B={} {:.0f}/s {:.0f} MiB", m.array_size, m.samples_per_second, m.peak_mib));
    }
    log(fmt::format("array size {} ({}: {})", array_size, plan->second.cached ? "cached" : "measured",
                    fmt::join(rates, ", ")));
  }
  for (auto jobs = algorithm_->next(capacity); !jobs.empty(); jobs = algorithm_->next(capacity)) {
    // Jobs of one group that start and end at the same epochs can share arrays.
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, std::vector<int64_t>> buckets;
    for (const auto& job : jobs) {
      auto& t = trial(job.trial);
      t.status = "running";
      buckets[{t.group, job.from_epochs, job.to_epochs, job.bracket, job.rung}].push_back(job.trial);
    }
    std::vector<ArrayRecord> round;
    for (auto& [key, ids] : buckets) {
      const auto [group, from, to, bracket, rung] = key;
      std::sort(ids.begin(), ids.end());
      for (const auto& members : balanced(ids, arraySizeOf(group))) {
        round.push_back({0, group, bracket, rung, from, to, members});
      }
    }
    // The arrays of most epochs first: workers claim them in this order,
    // and the longest started first end the round soonest.
    std::stable_sort(round.begin(), round.end(), [](const ArrayRecord& a, const ArrayRecord& b) {
      return a.to_epochs - a.from_epochs > b.to_epochs - b.from_epochs;
    });
    for (size_t k = 0; k < round.size(); ++k) round[k].id = static_cast<int64_t>(arrays_.size() + k);
    if (!runRound(round, log, stop)) return false;
    for (const auto& job : jobs) {
      auto& t = trials_.at(job.trial);
      const auto& last = t.rows.back();
      algorithm_->report(job, metric(last));
      t.status = t.epochs >= options_.algorithm.max_epochs ? "finished" : "paused";
    }
    takeDecisions();
    removeUnneededCheckpoints();
  }
  takeDecisions();
  removeUnneededCheckpoints();
  writeOutputs();
  return true;
}

void Tuner::removeUnneededCheckpoints() const {
  if (options_.keep_checkpoints || !lead()) return;
  auto done = [](const TrialRecord& t) { return t.status == "finished" || t.status.rfind("stopped", 0) == 0; };
  std::set<std::string> needed;
  bool best_done_kept = false;
  for (const auto* t : ranked()) {  // best first
    if (!done(*t) || !best_done_kept) needed.insert(t->latest.checkpoint);
    if (done(*t)) best_done_kept = true;
  }
  // Only arrays this run has reached: a replay (--resume) must not remove
  // the checkpoints of the arrays it has yet to replay.
  for (const auto& a : arrays_) {
    if (const auto where = checkpointOf(options_.out, a.id); !needed.count(where)) removeTree(where);
  }
}

void Tuner::takeDecisions() {
  decisions_ = algorithm_->decisions();
  for (const auto& d : decisions_) {
    if (!d.promoted) trials_.at(d.trial).status = fmt::format("stopped at rung {}", d.rung);
  }
}

bool Tuner::runRound(std::vector<ArrayRecord>& round, const Log& log, const std::function<bool()>& stop) {
  std::map<int64_t, nlohmann::json> results;  // journal entries, by array
  for (auto& array : round) {
    const auto journaled = journal_.find(array.id);
    if (journaled != journal_.end() && journaled->second.at("trials").get<std::vector<int64_t>>() == array.trials &&
        journaled->second.at("to").get<int64_t>() == array.to_epochs) {
      results[array.id] = journaled->second;
      array.replayed = true;
    }
  }
  auto train = [&](int64_t id) {
    if (results.count(id)) return true;
    auto entry = trainArray(round.at(id - round.front().id), log, stop);
    if (!entry) return false;
    if (options_.pool != nullptr) options_.pool->post(id, entry->dump());
    results[id] = *entry;
    return true;
  };
  auto& pool = options_.pool;
  if (pool == nullptr) {
    for (const auto& array : round) {
      if (!train(array.id)) return false;
    }
  } else {
    const int64_t first = round.front().id, count = static_cast<int64_t>(round.size());
    const auto done = [&](int64_t id) { return results.count(id) > 0; };
    while (const auto claimed = pool->claim(first, count, done)) {
      if (!train(*claimed)) return false;
    }
    // The others' arrays, as they finish.
    while (results.size() < round.size()) {
      for (const auto& array : round) {
        if (results.count(array.id)) continue;
        if (const auto posted = pool->result(array.id)) results[array.id] = nlohmann::json::parse(*posted);
      }
      if (results.size() < round.size()) {
        if (stop()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  for (auto& array : round) {
    apply(array, results.at(array.id), log);
    arrays_.push_back(array);
    if (lead() && !array.replayed) {
      std::ofstream journal((fs::path(options_.out) / "journal.jsonl").string(), std::ios::app);
      journal << results.at(array.id).dump() << "\n";
      journal.flush();
      if (!journal) throw UserError(fmt::format("cannot write {}/journal.jsonl", options_.out));
    }
    writeOutputs();
  }
  return true;
}

std::optional<nlohmann::json> Tuner::trainArray(const ArrayRecord& array, const Log& log,
                                                const std::function<bool()>& stop) {
  const auto where = checkpointOf(options_.out, array.id);
  std::vector<train::RunConfig> configs;
  for (int64_t id : array.trials) configs.push_back(trials_.at(id).config);
  auto config = arrayConfig(configs);
  std::error_code ec;
  // OUT/array_trials/N names the trials and epochs array N was started
  // with: a checkpoint left by an earlier attempt is this array's only if
  // they agree (a search resumed with another number of workers plans
  // random search's and ASHA's arrays otherwise).
  const auto started = (fs::path(options_.out) / "array_trials" / std::to_string(array.id)).string();
  const auto what = fmt::format("{} / {} -> {}\n", fmt::join(array.trials, " "), array.from_epochs, array.to_epochs);
  std::ifstream earlier(started);
  const bool same_array = earlier && std::string(std::istreambuf_iterator<char>(earlier), {}) == what;
  const bool cut_short = same_array && (fs::exists(where + "/state.pt", ec) || fs::exists(where + ".old/state.pt", ec));
  if (!cut_short) {
    removeTree(where);
    removeTree(where + ".old");
    fs::create_directories(fs::path(started).parent_path());
    writeFileAtomically(started, what);
  }
  if (cut_short || array.from_epochs > 0) {
    config.array_size = 0;
    config.seeds.clear();
  }
  if (cut_short) {
    config.resume = where;  // an earlier attempt's checkpoint of this array
  } else if (array.from_epochs > 0) {
    for (int64_t id : array.trials) config.members.push_back(trials_.at(id).latest);
  }
  const auto start = std::chrono::steady_clock::now();
  train::Run run(config);
  const int64_t resumed_at = run.progress().epochs_done;
  log(describe(array) + (cut_short ? fmt::format(", going on from its checkpoint after epoch {} (batch {} of the next)",
                                                 resumed_at, run.progress().batches_done)
                                   : ""));
  while (run.progress().epochs_done < array.to_epochs) {
    // Checkpointed after each epoch, and when stopped: a worker that dies
    // loses an epoch at most.
    const bool stopped = run.nextEpoch([&](int64_t, int64_t) { return stop(); }).empty();
    run.saveCheckpoint(where);
    if (stopped) return std::nullopt;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json entry = {{"array", array.id},         {"trials", array.trials},
                          {"from", array.from_epochs}, {"to", array.to_epochs},
                          {"seconds", seconds},        {"worker", options_.pool ? options_.pool->rank() : 0}};
  if (cut_short) entry["went_on_from_epoch"] = resumed_at;
  entry["rows"] = nlohmann::json::array();
  for (auto row : run.rows()) {
    if (row.epoch <= array.from_epochs) continue;
    row.member = array.trials.at(row.member);
    entry["rows"].push_back(rowToJson(row));
  }
  log(fmt::format("array {:>3}: {:.2f} s", array.id, seconds));
  return entry;
}

void Tuner::apply(ArrayRecord& array, const nlohmann::json& entry, const Log& log) {
  array.seconds = entry.at("seconds").get<double>();
  array.worker = entry.value("worker", 0);
  const int rank = options_.pool ? options_.pool->rank() : 0;
  if (array.replayed) {
    log(describe(array) + ": from the journal");
  } else if (array.worker != rank) {
    log(fmt::format("{}: {:.2f} s on worker {}{}", describe(array), array.seconds, array.worker,
                    entry.contains("went_on_from_epoch") ? fmt::format(" (going on from its checkpoint after epoch {})",
                                                                       entry["went_on_from_epoch"].get<int64_t>())
                                                         : ""));
  }
  const auto where = checkpointOf(options_.out, array.id);
  for (size_t b = 0; b < array.trials.size(); ++b) {
    auto& t = trials_.at(array.trials[b]);
    t.latest = {where, static_cast<int64_t>(b)};
    t.epochs = array.to_epochs;
  }
  for (const auto& r : entry.at("rows")) {
    const auto row = rowFromJson(r);
    trials_.at(row.member).rows.push_back(row);
  }
}

std::vector<const TrialRecord*> Tuner::ranked() const {
  std::vector<const TrialRecord*> out;
  for (const auto& [id, t] : trials_) {
    if (!t.rows.empty()) out.push_back(&t);
  }
  std::sort(out.begin(), out.end(), [&](const TrialRecord* a, const TrialRecord* b) {
    // Longer-trained trials first at equal metric: their value is the surer.
    const double ma = metric(a->rows.back()), mb = metric(b->rows.back());
    if (ma == mb && a->epochs != b->epochs) return a->epochs > b->epochs;
    return rankedBefore(ma, a->id, mb, b->id);
  });
  return out;
}

void Tuner::writeOutputs() const {
  if (lead()) writeTuneReport(options_.out, *this);
}

}  // namespace hfta::tune
