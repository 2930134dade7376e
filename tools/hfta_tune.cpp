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
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "distributed/local_ranks.h"
#include "distributed/world.h"
#include "passes/hfta/hfta.h"
#include "runtime/allocator.h"
#include "runtime/atomic_file.h"
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

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();
  CLI::App app{"Search hyper-parameters with trials trained in fused arrays.", "hfta-tune"};
  hfta::tune::TuneOptions options;
  auto& run = options.run;
  auto& algorithm = options.algorithm;
  algorithm.name = "hyperband";
  algorithm.max_epochs = 27;
  std::string metric = "loss", resume, dtype = "float32", device = "cpu", amp_dtype;
  bool amp = false;
  int threads = 0, workers = 1;
  size_t top = 10;
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
  app.add_option("--dataset", run.dataset, "digits (the default), mnist, cifar10, synthetic, wikitext, wikitext-mlm");
  app.add_option("--data", run.data, "the data set's file or folder");
  app.add_option("--limit", run.limit, "use only the data set's first N samples (0: all)");
  app.add_option("--holdout", run.holdout, "the fraction held out to rank trials on");
  app.add_option("--batch-size", run.options.batch_size);
  app.add_option("--optimizer", run.optimizer, "sgd (the default), adam, adamw, adagrad, rmsprop or adadelta");
  app.add_option("--scheduler", run.scheduler, "a learning-rate schedule, as hfta-train's");
  app.add_option("--loss", run.options.loss, "cross_entropy, mse or bce_with_logits");
  app.add_option("--dtype", dtype, "float32 (the default) or float64");
  app.add_option("--device", device, "cpu (the default), cuda or cuda:N");
  app.add_flag("--amp", amp,
               "mixed precision, as hfta-train's (bfloat16 on the CPU, float16 with a scale per trial on CUDA)");
  app.add_option("--amp-dtype", amp_dtype, "bfloat16 or float16");
  app.add_option("--seed", options.seed, "the search space's draws and the data's order");
  app.add_option("--metric", metric, "rank trials by held-out loss (the default) or accuracy");
  app.add_option("--out", options.out, "the folder for the results")->required();
  app.add_option("--resume", resume, "go on with the tuning run in this folder (alone: with its command line)");
  app.add_option("--top", top, "leaderboard rows");
  app.add_flag("--keep-checkpoints", options.keep_checkpoints,
               "keep every array's checkpoint in OUT/arrays (default: only those still needed)");
  app.add_option("--threads", threads, "intra-op threads (default: all cores)");
  app.add_option("--workers", workers,
                 "worker processes on this machine, each training its share of every round's arrays (default 1; "
                 "under torchrun, its processes are the workers)");
  app.add_option("--config", "a JSON object of these flags; flags after it win");

  std::vector<std::string> args;
  try {
    args = savedCommand(hfta::tools::expandConfigFiles(argc, argv));
  } catch (const UserError& e) {
    fmt::print(stderr, "hfta-tune: error: {}\n", e.what());
    return hfta::tools::kExitUserError;
  }
  std::vector<char*> expanded;
  for (auto& a : args) expanded.push_back(a.data());
  return hfta::tools::runTool(app, static_cast<int>(expanded.size()), expanded.data(), [&]() -> int {
    try {
      options.rank_by = hfta::train::rankByName(metric);
      options.run.options.seed = options.seed;
      options.run.options.dtype = hfta::train::dtypeByName(dtype);
      options.run.options.device = hfta::train::deviceByName(device);
      options.run.options.amp = hfta::train::ampSetting(amp, amp_dtype, options.run.options.device);
      try {
        options.parsed_space = hfta::tune::SearchSpace::load(options.space);
      } catch (const hfta::train::SettingError& e) {
        throw UserError(fmt::format("{}: setting \"{}\": {}", options.space, e.setting(), e.problem()));
      }
      options.plan_cache = hfta::tune::defaultPlanCache();
      if (run.data.empty()) run.data = run.dataset.rfind("wikitext", 0) == 0 ? HFTA_CORPUS_PATH : HFTA_DIGITS_PATH;
      // Workers: torchrun's processes, or --workers N started from here
      // (this process is rank 0). Rank 0 reports and writes; the other
      // workers' reports would repeat it.
      const auto world = hfta::distributed::worldFromEnvironment();
      if (workers < 1) throw UserError("--workers must be at least 1");
      const bool lead = !world || world->rank == 0;
      if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr) throw UserError("cannot quiet stdout");
      // A worker restarted by torchrun goes on with the run it was part of.
      if (world && world->restart_count > 0) resume = options.out;
      if (threads > 0) at::set_num_threads(threads);
      const auto journal = fs::path(options.out) / "journal.jsonl";
      if (lead && resume.empty() && fs::exists(journal)) {
        throw UserError(fmt::format("{} holds a tuning run already: go on with --resume {}, or give another --out",
                                    options.out, options.out));
      }
      std::error_code same_ec;
      if (!resume.empty() && !fs::equivalent(resume, options.out, same_ec)) {
        throw UserError(fmt::format("--resume {} and --out {} must be the same folder", resume, options.out));
      }
      std::unique_ptr<hfta::distributed::LocalRanks> local;
      if (!world && workers > 1) local = std::make_unique<hfta::distributed::LocalRanks>(workers, args);
      const auto place = world ? world : local ? std::optional(local->world()) : std::nullopt;
      std::unique_ptr<hfta::tune::WorkerPool> pool;
      if (place) {
        pool =
            std::make_unique<hfta::tune::WorkerPool>(place->rank, place->size, hfta::distributed::connectStore(*place));
        options.pool = pool.get();
        // One GPU per worker of a node, where there are several.
        auto& device = options.run.options.device;
        if (device.is_cuda() && !device.has_index()) {
          device = c10::Device(
              at::kCUDA, static_cast<c10::DeviceIndex>(place->local_rank % at::detail::getCUDAHooks().deviceCount()));
        }
      }
      hfta::tune::Tuner tuner(options);
      if (lead && resume.empty()) {
        const nlohmann::json command = {{"cwd", fs::current_path().string()},
                                        {"args", std::vector<std::string>(args.begin() + 1, args.end())}};
        hfta::writeFileAtomically((fs::path(options.out) / "command.json").string(), command.dump() + "\n");
      }
      std::signal(SIGINT, requestStop);
      std::signal(SIGTERM, requestStop);
      fmt::print("hfta-tune: {} over {} with R = {}, eta = {}; results in {}{}\n", algorithm.name, options.space,
                 algorithm.max_epochs, algorithm.eta, options.out,
                 place ? fmt::format("; {} workers", place->size) : "");
      bool done = tuner.run(
          [](const std::string& line) {
            fmt::print("hfta-tune: {}\n", line);
            std::fflush(stdout);
          },
          [&] {
            if (local) local->poll();  // a killed worker is replaced; a failed one ends the run
            return g_stop.load();
          });
      if (local) done = local->wait() && done;
      if (!lead) return done ? 0 : kExitInterrupted;
      if (!done) {
        fmt::print(stderr, "hfta-tune: interrupted; go on with hfta-tune --resume {}\n", options.out);
        return kExitInterrupted;
      }
      double seconds = 0;
      int64_t replayed = 0;
      for (const auto& a : tuner.arrays()) {
        seconds += a.seconds;
        replayed += a.replayed ? 1 : 0;
      }
      fmt::print("\nhfta-tune: {} trials in {} arrays ({} from the journal), {:.1f} s of training\n\n{}",
                 tuner.trials().size(), tuner.arrays().size(), replayed, seconds,
                 hfta::tune::tuneLeaderboard(tuner, top));
      const auto ranked = tuner.ranked();
      if (!ranked.empty()) {
        const auto& best = *ranked[0];
        const auto fused = hfta::train::loadCheckpointModule(best.latest.checkpoint);
        const auto path = (fs::path(options.out) / "best.pt").string();
        hfta::saveModule(hfta::split(fused, best.latest.member), path);
        fmt::print("\nhfta-tune: the best trial, {}, as a plain model: {}\n", best.id, path);
      }
      fmt::print("hfta-tune: trials.csv, metrics.csv, rungs.csv, arrays.csv and curves.svg in {}\n", options.out);
      return 0;
    } catch (const hfta::train::SettingError& e) {
      throw UserError(fmt::format("{}: {}", hfta::tools::flagOf(e.setting()), e.problem()));
    }
  });
}
