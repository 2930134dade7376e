#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>

#include <fmt/format.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "passes/hfta/hfta.h"
#include "runtime/atomic_file.h"

namespace hfta::train {
namespace fs = std::filesystem;

namespace {

// Removes a checkpoint folder (files only, no subfolders). POSIX calls, not
// std::filesystem::remove_all: the torch wheel's libtorch.so exports its own
// std::filesystem::remove_all, which the dynamic linker binds first and
// which crashes.
void removeFlatFolder(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
  }
  closedir(d);
  ::rmdir(dir.c_str());
}

c10::IValue rowsToIValue(const std::vector<MemberEpoch>& rows) {
  c10::List<double> flat;
  for (const auto& r : rows) {
    for (double v : {static_cast<double>(r.epoch), static_cast<double>(r.member), r.train_loss, r.heldout_loss,
                     r.heldout_accuracy, r.lr, r.seconds, r.diverged ? 1.0 : 0.0}) {
      flat.push_back(v);
    }
  }
  return flat;
}

std::vector<MemberEpoch> rowsFromIValue(const c10::IValue& value) {
  const auto flat = value.toDoubleVector();
  std::vector<MemberEpoch> rows;
  for (size_t i = 0; i + 8 <= flat.size(); i += 8) {
    rows.push_back({static_cast<int64_t>(flat[i]), static_cast<int64_t>(flat[i + 1]), flat[i + 2], flat[i + 3],
                    flat[i + 4], flat[i + 5], flat[i + 6], flat[i + 7] != 0});
  }
  return rows;
}

}  // namespace

void saveCheckpoint(const std::string& dir, const torch::jit::Module& module, const optim::FusedOptimizer& optimizer,
                    const Schedule* schedule, const Progress& progress,
                    const std::vector<MemberEpoch>& rows) {
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("optimizer", optimizer.state_dict());
  if (schedule != nullptr) state.insert("scheduler", schedule->state_dict());
  state.insert("epochs_done", progress.epochs_done);
  state.insert("batches_done", progress.batches_done);
  state.insert("loss_sum", c10::List<double>(progress.loss_sum));
  c10::List<bool> diverged;
  for (bool d : progress.diverged) diverged.push_back(d);
  state.insert("diverged", diverged);
  state.insert("rows", rowsToIValue(rows));
  state.insert("rng", at::detail::getDefaultCPUGenerator().get_state());
  const auto bytes = torch::pickle_save(state);

  const std::string fresh = dir + ".partial", old = dir + ".old";
  removeFlatFolder(fresh);
  if (::mkdir(fresh.c_str(), 0755) != 0) {
    throw UserError(fmt::format("cannot create the checkpoint folder {}: {}", fresh, std::strerror(errno)));
  }
  saveModule(module, fresh + "/fused.pt");
  try {
    writeAtomically(fresh + "/state.pt", [&](const std::string& tmp) {
      std::ofstream out(tmp, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) throw std::runtime_error("the write failed");
    });
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
  // The old checkpoint stays whole until the new one is in place.
  removeFlatFolder(old);
  struct stat existing {};
  if (::stat(dir.c_str(), &existing) == 0 && ::rename(dir.c_str(), old.c_str()) != 0) {
    throw UserError(fmt::format("cannot move the old checkpoint {} aside: {}", dir, std::strerror(errno)));
  }
  if (::rename(fresh.c_str(), dir.c_str()) != 0) {
    throw UserError(fmt::format("cannot put the checkpoint in place at {}: {}", dir, std::strerror(errno)));
  }
  removeFlatFolder(old);
}

torch::jit::Module loadCheckpointModule(const std::string& dir) {
  const auto path = (fs::path(dir) / "fused.pt").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UserError(fmt::format("{} is not a checkpoint folder: it has no fused.pt (hfta-train writes them with "
                                "--checkpoint-every)", dir));
  }
  return loadMembers({path})[0].module;
}

Resumed loadCheckpointState(const std::string& dir, optim::FusedOptimizer& optimizer, Schedule* schedule) {
  const auto path = (fs::path(dir) / "state.pt").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{} is not a checkpoint folder: it has no state.pt", dir));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    const auto state = torch::pickle_load(bytes).toGenericDict();
    optimizer.load_state_dict(state.at("optimizer"));
    if (schedule != nullptr) {
      if (!state.contains("scheduler")) throw UserError(fmt::format("{} was saved without a schedule", dir));
      schedule->load_state_dict(state.at("scheduler"));
    }
    Resumed resumed;
    resumed.progress.epochs_done = state.at("epochs_done").toInt();
    resumed.progress.batches_done = state.at("batches_done").toInt();
    resumed.progress.loss_sum = state.at("loss_sum").toDoubleVector();
    for (bool d : state.at("diverged").toBoolList()) resumed.progress.diverged.push_back(d);
    resumed.rows = rowsFromIValue(state.at("rows"));
    auto generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(state.at("rng").toTensor());
    return resumed;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw UserError(fmt::format("{} is not a readable checkpoint: {}", path, what.substr(0, what.find('\n'))));
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("{} does not fit this run: {}", dir, e.what()));
  }
}

}  // namespace hfta::train
