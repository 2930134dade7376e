// hfta-tune: a hyper-parameter search (random, Hyperband or ASHA) whose
// trials train in fused arrays, which shrink as rungs stop trials.
//
//   hfta-tune space.json --model cnn.pt --algorithm hyperband --max-epochs 27 --out runs/tune
//   hfta-tune --resume runs/tune          # go on after an interruption
//
// Over several workers, each training its share of every round's arrays
// (tune/worker_pool.h; docs/distributed.md):
//
//   hfta-tune space.json --model cnn.pt --out runs/tune --workers 2     # on this machine
//   torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29400 --no-python \
//       hfta-tune space.json --model cnn.pt --device cuda --out /shared/runs/tune
//
// The engine is tune/tuner.h; this is its command line.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "distributed/local_ranks.h"
#include "distributed/world.h"
#include "hfta/hfta.h"
#include "support/allocator.h"
#include "support/atomic_file.h"
#include "tools/run_flags.h"
#include "tools/tool_main.h"
#include "train/checkpoint.h"
#include "train/setting_error.h"
#include "tune/tune_report.h"
#include "tune/tuner.h"

namespace {

namespace fs = std::filesystem;
using hfta::UserError;

std::atomic<bool> g_stop{false};
extern "C" void requestStop(int) { g_stop = true; }
constexpr int kExitInterrupted = 130;

// `hfta-tune --resume DIR` alone: the command line DIR was started with,
// run from the folder it was started in (its paths are relative to it).
std::vector<std::string> savedCommand(const std::vector<std::string>& args) {
  if (args.size() != 3 || args[1] != "--resume") return args;
  const auto dir = fs::absolute(args[2]).string();
  const auto path = (fs::path(dir) / "command.json").string();
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("--resume: {} is not a tuning run's folder: it has no command.json", args[2]));
  const auto saved = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!saved.is_object() || !saved.contains("cwd") || !saved.contains("args")) {
    throw UserError(fmt::format("--resume: {} is not readable", path));
  }
  std::error_code ec;
  fs::current_path(saved["cwd"].get<std::string>(), ec);
  if (ec) {
    throw UserError(fmt::format("--resume: the run was started in {}, which is gone: {}",
                                saved["cwd"].get<std::string>(), ec.message()));
  }
  std::vector<std::string> command{args[0]};
  for (const auto& arg : saved["args"].get<std::vector<std::string>>()) command.push_back(arg);
  command.push_back("--resume");
  command.push_back(dir);
  return command;
}

// The command line, parsed.
struct TuneCommand {
  hfta::tune::TuneOptions options;
  hfta::tools::RunFlags run_flags;
  std::string resume;
  int workers = 1;
  size_t top = 10;
};

void addTuneFlags(CLI::App& app, TuneCommand& c) {
  auto& options = c.options;
  auto& algorithm = options.algorithm;
  algorithm.name = "hyperband";
  algorithm.max_epochs = 27;
  app.add_option("space", options.space, "the search space (JSON): each setting a distribution or a fixed value")
      ->required();
  app.add_option("--model", options.model,
                 "the model (.pt, a plain TorchScript model); \"{setting}\" in its path stands for a trial's value")
      ->required();
  app.add_option("--algorithm", algorithm.name, "random, hyperband (the default) or asha");
  app.add_option("--trials", algorithm.trials,
                 "trials to start (random, asha); hyperband: whole iterations of its brackets until this many");
  app.add_option("--max-epochs", algorithm.max_epochs, "R: the most epochs a trial trains (default 27)");
  app.add_option("--eta", algorithm.eta, "each rung keeps 1/eta of its trials (default 3)");
  app.add_option("--min-epochs", algorithm.min_epochs, "asha: the first rung's epochs (default 1)");
  app.add_option("--max-array-size", options.max_array_size, "the most trials in one fused array (default 16)");
  app.add_option("--array-size", options.array_size,
                 "trials per array, as given (default: the largest size that buys throughput, measured and cached)");
  c.run_flags.metric = "loss";  // the default
  hfta::tools::addRunFlags(app, options.run, c.run_flags);
  app.add_option("--seed", options.seed, "the search space's draws and the data's order");
  app.add_option("--out", options.out, "the folder for the results")->required();
  app.add_option("--resume", c.resume, "go on with the tuning run in this folder (alone: with its command line)");
  app.add_option("--top", c.top, "leaderboard rows");
  app.add_flag("--keep-checkpoints", options.keep_checkpoints,
               "keep every array's checkpoint in OUT/arrays (default: only those still needed)");
  app.add_option("--workers", c.workers,
                 "worker processes on this machine, each training its share of every round's arrays (default 1; "
                 "under torchrun, its processes are the workers)");
}

// The settings the flags leave to be worked out: the run's, the search
// space, the plan cache. UserError where the folder does not fit --resume.
void completeOptions(TuneCommand& c, bool lead) {
  auto& options = c.options;
  options.rank_by = hfta::tools::applyRunFlags(c.run_flags, options.run);
  options.run.options.seed = options.seed;
  try {
    options.parsed_space = hfta::tune::SearchSpace::load(options.space);
  } catch (const hfta::train::SettingError& e) {
    throw UserError(fmt::format("{}: setting \"{}\": {}", options.space, e.setting(), e.problem()));
  }
  options.plan_cache = hfta::tune::defaultPlanCache();
  if (c.workers < 1) throw UserError("--workers must be at least 1");
  const auto journal = fs::path(options.out) / "journal.jsonl";
  if (lead && c.resume.empty() && fs::exists(journal)) {
    throw UserError(fmt::format("{} holds a tuning run already: go on with --resume {}, or give another --out",
                                options.out, options.out));
  }
  std::error_code same_ec;
  if (!c.resume.empty() && !fs::equivalent(c.resume, options.out, same_ec)) {
    throw UserError(fmt::format("--resume {} and --out {} must be the same folder", c.resume, options.out));
  }
}

// The workers: torchrun's processes, or --workers N started from here
// (this process is rank 0), sharing every round's arrays through a pool.
struct Workers {
  std::optional<hfta::distributed::World> world;  // torchrun's
  std::unique_ptr<hfta::distributed::LocalRanks> local;
  std::unique_ptr<hfta::tune::WorkerPool> pool;
  bool lead() const { return !world || world->rank == 0; }  // reports and writes
};

void startWorkers(Workers& workers, TuneCommand& c, const std::vector<std::string>& args) {
  if (!workers.world && c.workers > 1) workers.local = std::make_unique<hfta::distributed::LocalRanks>(c.workers, args);
  const auto place = workers.world   ? workers.world
                     : workers.local ? std::optional(workers.local->world())
                                     : std::nullopt;
  if (!place) return;
  workers.pool =
      std::make_unique<hfta::tune::WorkerPool>(place->rank, place->size, hfta::distributed::connectStore(*place));
  c.options.pool = workers.pool.get();
  // One GPU per worker of a node, where there are several.
  auto& device = c.options.run.options.device;
  if (device.is_cuda() && !device.has_index()) {
    device = c10::Device(at::kCUDA,
                         static_cast<c10::DeviceIndex>(place->local_rank % at::detail::getCUDAHooks().deviceCount()));
  }
}

// The leaderboard, and the best trial as a plain model.
void report(const hfta::tune::Tuner& tuner, const TuneCommand& c) {
  double seconds = 0;
  int64_t replayed = 0;
  for (const auto& a : tuner.arrays()) {
    seconds += a.seconds;
    replayed += a.replayed ? 1 : 0;
  }
  fmt::print("\nhfta-tune: {} trials in {} arrays ({} from the journal), {:.1f} s of training\n\n{}",
             tuner.trials().size(), tuner.arrays().size(), replayed, seconds,
             hfta::tune::tuneLeaderboard(tuner, c.top));
  const auto ranked = tuner.ranked();
  if (!ranked.empty()) {
    const auto& best = *ranked[0];
    const auto fused = hfta::train::loadCheckpointModule(best.latest.checkpoint);
    const auto path = (fs::path(c.options.out) / "best.pt").string();
    hfta::saveModule(hfta::split(fused, best.latest.member), path);
    fmt::print("\nhfta-tune: the best trial, {}, as a plain model: {}\n", best.id, path);
  }
  fmt::print("hfta-tune: trials.csv, metrics.csv, rungs.csv, arrays.csv and curves.svg in {}\n", c.options.out);
}

int tune(TuneCommand& c, const std::vector<std::string>& args) {
  Workers workers;
  workers.world = hfta::distributed::worldFromEnvironment();
  // A worker restarted by torchrun goes on with the run it was part of.
  if (workers.world && workers.world->restart_count > 0) c.resume = c.options.out;
  completeOptions(c, workers.lead());
  if (!workers.lead() && std::freopen("/dev/null", "w", stdout) == nullptr) throw UserError("cannot quiet stdout");
  startWorkers(workers, c, args);
  hfta::tune::Tuner tuner(c.options);
  const auto& out = c.options.out;
  if (workers.lead() && c.resume.empty()) {
    const nlohmann::json command = {{"cwd", fs::current_path().string()},
                                    {"args", std::vector<std::string>(args.begin() + 1, args.end())}};
    hfta::writeFileAtomically((fs::path(out) / "command.json").string(), command.dump() + "\n");
  }
  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  const auto& algorithm = c.options.algorithm;
  fmt::print("hfta-tune: {} over {} with R = {}, eta = {}; results in {}{}\n", algorithm.name, c.options.space,
             algorithm.max_epochs, algorithm.eta, out,
             c.options.pool ? fmt::format("; {} workers", c.options.pool->size()) : "");
  bool done = tuner.run(
      [](const std::string& line) {
        fmt::print("hfta-tune: {}\n", line);
        std::fflush(stdout);
      },
      [&] {
        if (workers.local) workers.local->poll();  // a killed worker is replaced; a failed one ends the run
        return g_stop.load();
      });
  if (workers.local) done = workers.local->wait() && done;
  if (!workers.lead()) return done ? 0 : kExitInterrupted;
  if (!done) {
    fmt::print(stderr, "hfta-tune: interrupted; go on with hfta-tune --resume {}\n", out);
    return kExitInterrupted;
  }
  report(tuner, c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();
  CLI::App app{"Search hyper-parameters with trials trained in fused arrays.", "hfta-tune"};
  TuneCommand command;
  addTuneFlags(app, command);
  std::vector<std::string> args;
  return hfta::tools::runTrainingTool(
      app, argc, argv, args, [&] { return tune(command, args); }, savedCommand);
}
