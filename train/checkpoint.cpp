#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/serialize.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

#include "hfta/io.h"
#include "support/atomic_file.h"
#include "support/error_summary.h"
#include "train/setting_error.h"

namespace hfta::train {
namespace fs = std::filesystem;

namespace {

std::string withoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The metrics rows, kRowWidth numbers each (checkpoints written before the
// timing and loss-scaling columns have 8).
constexpr size_t kRowWidth = 11, kFirstRowWidth = 8;

c10::IValue rowsToIValue(const std::vector<MemberEpoch>& rows) {
  c10::List<double> flat;
  for (const auto& r : rows) {
    for (double v : {static_cast<double>(r.epoch), static_cast<double>(r.member), r.train_loss, r.heldout_loss,
                     r.heldout_accuracy, r.lr, r.seconds, r.diverged ? 1.0 : 0.0, r.train_seconds,
                     static_cast<double>(r.skipped_steps), r.loss_scale}) {
      flat.push_back(v);
    }
  }
  return flat;
}

std::vector<MemberEpoch> rowsFromIValue(const c10::IValue& value, size_t width) {
  const auto flat = value.toDoubleVector();
  std::vector<MemberEpoch> rows;
  for (size_t i = 0; i + width <= flat.size(); i += width) {
    rows.push_back({static_cast<int64_t>(flat[i]), static_cast<int64_t>(flat[i + 1]), flat[i + 2], flat[i + 3],
                    flat[i + 4], flat[i + 5], flat[i + 6], flat[i + 7] != 0});
    if (width == kRowWidth) {
      rows.back().train_seconds = flat[i + 8];
      rows.back().skipped_steps = static_cast<int64_t>(flat[i + 9]);
      rows.back().loss_scale = flat[i + 10];
    }
  }
  return rows;
}

}  // namespace

void saveCheckpoint(const std::string& folder, const torch::jit::Module& module, const optim::FusedOptimizer& optimizer,
                    const Schedule* schedule, const CheckpointAmp& amp, const Progress& progress,
                    const std::vector<MemberEpoch>& rows) {
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("optimizer", optimizer.state_dict());
  if (schedule != nullptr) state.insert("scheduler", schedule->state_dict());
  state.insert("amp", amp.dtype);
  if (amp.scaler != nullptr) state.insert("scaler", amp.scaler->state_dict());
  c10::List<int64_t> skipped(progress.skipped_steps);
  state.insert("skipped_steps", skipped);
  state.insert("row_width", static_cast<int64_t>(kRowWidth));
  state.insert("epochs_done", progress.epochs_done);
  state.insert("batches_done", progress.batches_done);
  state.insert("loss_sum", c10::List<double>(progress.loss_sum));
  c10::List<bool> diverged;
  for (bool d : progress.diverged) diverged.push_back(d);
  state.insert("diverged", diverged);
  state.insert("rows", rowsToIValue(rows));
  state.insert("rng", at::detail::getDefaultCPUGenerator().get_state());
  const auto bytes = torch::pickle_save(state);

  const std::string dir = withoutTrailingSlash(folder);
  const std::string fresh = dir + ".partial", old = dir + ".old";
  removeTree(fresh);
  if (::mkdir(fresh.c_str(), 0777) != 0) {
    throw UserError(fmt::format("cannot create the checkpoint folder {}: {}", fresh, std::strerror(errno)));
  }
  try {
    AtomicFiles files;
    files.add(fresh + "/fused.pt", [&](std::ostream& out) { module.save(out); });
    files.add(fresh + "/state.pt",
              [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
    files.commit();
  } catch (const FileWriteError& e) {
    removeTree(fresh);
    throw UserError(fmt::format("{}; the checkpoint {} is unchanged", e.what(), dir));
  }
  // The old checkpoint stays whole until the new one is in place: a run
  // stopped between the two renames leaves it as DIR.old, which --resume
  // finds (resolveCheckpoint). An old DIR.old goes only when DIR replaces it.
  struct stat existing {};
  if (::stat(dir.c_str(), &existing) == 0) {
    removeTree(old);
    if (::rename(dir.c_str(), old.c_str()) != 0) {
      throw UserError(fmt::format("cannot move the old checkpoint {} aside: {}", dir, std::strerror(errno)));
    }
  }
  if (::rename(fresh.c_str(), dir.c_str()) != 0) {
    throw UserError(fmt::format("cannot put the checkpoint in place at {}: {}; the previous one is {}", dir,
                                std::strerror(errno), old));
  }
  syncParentFolder(dir);
  removeTree(old);
}

std::string resolveCheckpoint(const std::string& folder, std::string* note) {
  const std::string dir = withoutTrailingSlash(folder);
  auto whole = [](const std::string& d) {
    struct stat info {};
    return ::stat((d + "/fused.pt").c_str(), &info) == 0 && ::stat((d + "/state.pt").c_str(), &info) == 0;
  };
  if (whole(dir)) return dir;
  const std::string old = dir + ".old";
  if (whole(old)) {
    if (note != nullptr) {
      *note = fmt::format(
          "{} is missing, but {} is whole (a checkpoint save was stopped between its renames): "
          "resuming from it",
          dir, old);
    }
    return old;
  }
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    throw SettingError("resume", fmt::format("{}: no such folder (a run writes its checkpoint every few epochs "
                                             "when asked to, and when it is interrupted)",
                                             dir));
  }
  throw SettingError("resume", fmt::format("{} is not a checkpoint folder: it has no fused.pt and state.pt", dir));
}

torch::jit::Module loadCheckpointModule(const std::string& dir) {
  const auto path = (fs::path(dir) / "fused.pt").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw SettingError("resume", fmt::format("{} is not a checkpoint folder: it has no fused.pt", dir));
  }
  return loadMembers({path})[0].module;
}

c10::IValue readCheckpointState(const std::string& dir) {
  const auto path = (fs::path(dir) / "state.pt").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{} is not a checkpoint folder: it has no state.pt", dir));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    auto state = torch::pickle_load(bytes);
    if (!state.isGenericDict()) throw UserError(fmt::format("{} is not a checkpoint's state", path));
    return state;
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("{} is not a readable checkpoint: {}", path, errorSummary(e)));
  }
}

Resumed restoreCheckpointState(const c10::IValue& saved, const std::string& dir, optim::FusedOptimizer& optimizer,
                               Schedule* schedule, const CheckpointAmp& amp) {
  try {
    const auto state = saved.toGenericDict();
    optimizer.load_state_dict(state.at("optimizer"));
    if (schedule != nullptr) {
      if (!state.contains("scheduler")) {
        throw SettingError("scheduler", fmt::format("the checkpoint {} was saved by a run without a schedule", dir));
      }
      schedule->load_state_dict(state.at("scheduler"));
    } else if (state.contains("scheduler")) {
      throw SettingError("scheduler", fmt::format("the checkpoint {} was saved by a run with a schedule; give the "
                                                  "same schedule to resume it",
                                                  dir));
    }
    const std::string saved_amp = state.contains("amp") ? state.at("amp").toStringRef() : "none";
    if (saved_amp != amp.dtype) {
      throw SettingError("amp", fmt::format("the checkpoint {} was trained with mixed precision {}, this run asks for "
                                            "{}: resume with the same --amp and --amp-dtype",
                                            dir, saved_amp, amp.dtype));
    }
    if (amp.scaler != nullptr) amp.scaler->load_state_dict(state.at("scaler"));
    Resumed resumed;
    if (state.contains("skipped_steps")) resumed.progress.skipped_steps = state.at("skipped_steps").toIntVector();
    resumed.progress.epochs_done = state.at("epochs_done").toInt();
    resumed.progress.batches_done = state.at("batches_done").toInt();
    resumed.progress.loss_sum = state.at("loss_sum").toDoubleVector();
    for (bool d : state.at("diverged").toBoolList()) resumed.progress.diverged.push_back(d);
    resumed.rows = rowsFromIValue(state.at("rows"), state.contains("row_width")
                                                        ? static_cast<size_t>(state.at("row_width").toInt())
                                                        : kFirstRowWidth);
    auto generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(state.at("rng").toTensor());
    return resumed;
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("{} is not a readable checkpoint: {}", dir, errorSummary(e)));
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("the checkpoint {} does not fit this run: {}", dir, e.what()));
  } catch (const std::out_of_range& e) {
    throw UserError(fmt::format("{} is not a checkpoint's state: an entry is missing", dir));
  }
}

c10::IValue gatherCheckpointStates(const std::vector<MemberOfState>& picks) {
  auto pick = [&](const char* key) {
    std::vector<MemberOfState> entries;
    for (const auto& p : picks) entries.push_back({p.state.toGenericDict().at(key), p.member});
    return entries;
  };
  const auto first = picks.at(0).state.toGenericDict();
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("epochs_done", sameEntry(picks, "epochs_done", "epochs done"));
  state.insert("batches_done", sameEntry(picks, "batches_done", "positions in their epoch"));
  state.insert("optimizer", optim::FusedOptimizer::gather_state_dicts(pick("optimizer")));
  for (const auto& p : picks) {
    if (p.state.toGenericDict().contains("scheduler") != first.contains("scheduler")) {
      throw std::invalid_argument("members trained with a schedule and without one cannot share an array");
    }
  }
  if (first.contains("scheduler")) state.insert("scheduler", Schedule::gatherStates(pick("scheduler")));
  state.insert("amp", sameEntry(picks, "amp", "mixed precision"));
  if (first.contains("scaler")) {
    state.insert("scaler", optim::FusedGradScaler::gather_state_dicts(pick("scaler")));
  }
  state.insert("skipped_steps", gatherListEntry(picks, "skipped_steps"));
  state.insert("loss_sum", gatherListEntry(picks, "loss_sum"));
  state.insert("diverged", gatherListEntry(picks, "diverged"));
  // Each member's rows, numbered as in the new array.
  std::vector<MemberEpoch> rows;
  for (size_t b = 0; b < picks.size(); ++b) {
    const auto dict = picks[b].state.toGenericDict();
    const auto width = dict.contains("row_width") ? static_cast<size_t>(dict.at("row_width").toInt()) : kFirstRowWidth;
    for (auto row : rowsFromIValue(dict.at("rows"), width)) {
      if (row.member != picks[b].member) continue;
      row.member = static_cast<int64_t>(b);
      rows.push_back(row);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const MemberEpoch& a, const MemberEpoch& b) {
    return std::tie(a.epoch, a.member) < std::tie(b.epoch, b.member);
  });
  state.insert("rows", rowsToIValue(rows));
  state.insert("row_width", static_cast<int64_t>(kRowWidth));
  state.insert("rng", first.at("rng"));
  return state;
}

}  // namespace hfta::train
