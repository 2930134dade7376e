// hfta-train: trains a fused array (from hfta-fuse) on a data set, every
// member with its own hyper-parameters, and reports each member's metrics.
//
//   hfta-train fused.pt --lr 0.01,0.03,0.1,0.3 --optimizer adam --epochs 5 --out runs/sweep
//
// Writes OUT/metrics.csv and OUT/metrics.json (per epoch and member), prints
// the members ranked by the chosen metric, and --export-best DIR writes the
// best member(s) as plain .pt files. The run itself is train/run.h; this is
// its command line.
//
// Under torchrun (or with torchrun's RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set by hand) each process is one rank of a data-parallel run
// (docs/distributed.md): rank 0 reports and writes the metrics, checkpoints
// and exported members; every rank prints its errors.
//
//   torchrun --standalone --nproc-per-node 2 --no-python hfta-train fused.pt --lr 0.01,0.1 --out runs/dp
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <sstream>

#include "distributed/world.h"
#include "passes/hfta/hfta.h"
#include "runtime/allocator.h"
#include "tools/tool_main.h"
#include "train/metrics.h"
#include "train/run.h"
#include "train/setting_error.h"

namespace {

using hfta::UserError;
using hfta::train::MemberEpoch;

// Set by SIGINT / SIGTERM: the run stops after the batch in flight and
// writes a checkpoint.
std::atomic<bool> g_stop{false};
extern "C" void requestStop(int) { g_stop = true; }
constexpr int kExitInterrupted = 130;

// "0.01,0.03" -> {0.01, 0.03}; one value stands for every member.
std::vector<double> parseValues(const std::string& flag, const std::string& text) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      values.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UserError(fmt::format("{} takes numbers separated by commas, got \"{}\"", flag, text));
    }
  }
  if (values.empty()) throw UserError(fmt::format("{} is empty", flag));
  return values;
}

void printBar(int64_t epoch, int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  fmt::print(stderr, "\repoch {:>3} [{}{}] {}/{} batches", epoch, std::string(filled, '#'),
             std::string(kWidth - filled, '.'), done, total);
  std::fflush(stderr);
}

// HFTA's examples print "Epoch N took X s!" for the training steps; the
// held-out evaluation's time follows.
std::string epochLine(const std::vector<MemberEpoch>& rows, bool scaled) {
  std::string line = fmt::format("epoch {:>3} took {:.2f} s (+{:.2f} s held out):", rows[0].epoch,
                                 rows[0].train_seconds, rows[0].seconds - rows[0].train_seconds);
  for (const auto& r : rows) {
    line += r.diverged ? fmt::format("  m{} diverged", r.member)
                       : fmt::format("  m{} {:.3f}/{:.1f}%", r.member, r.heldout_loss, 100 * r.heldout_accuracy);
    if (scaled && r.skipped_steps > 0) line += fmt::format(" ({} skipped)", r.skipped_steps);
  }
  return line;
}

void makeFolder(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directories(dir, ec)) {
    throw UserError(fmt::format("cannot create the folder {}", dir));
  }
}

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();  // a fused array's large activations, reused every step
  CLI::App app{"Train the members of a fused module (from hfta-fuse), each with its own hyper-parameters.",
               "hfta-train"};
  hfta::train::RunConfig config;

  std::map<std::string, std::string> settings;           // optimizer setting name -> values
  std::map<std::string, std::string> schedule_settings;  // schedule setting name -> values
  std::string out, export_best, metric = "accuracy", seeds, dtype = "float32", checkpoint, device = "cpu", amp_dtype;
  bool amp = false, auto_resume = false;
  int threads = 0;
  int64_t top = 1, checkpoint_every = 0;
  app.add_option("model", config.model, "the fused module (.pt) written by hfta-fuse")->required();
  app.add_option("--dataset", config.dataset,
                 "digits (the default, shipped), mnist, cifar10, synthetic, or text in WikiText-2's format: wikitext "
                 "(next word) or wikitext-mlm (masked words, BERT)");
  app.add_option("--data", config.data,
                 "the data set's file (digits) or folder (mnist, cifar10, wikitext: default the shipped English "
                 "corpus)");
  app.add_option("--sequence-length", config.sequence_length, "tokens per sequence (text data; default 35)");
  app.add_option("--optimizer", config.optimizer, "sgd, adam, adamw, adagrad, rmsprop or adadelta");
  for (const char* key : {"lr", "momentum", "weight_decay", "beta1", "beta2", "eps", "dampening", "nesterov", "amsgrad",
                          "alpha", "centered", "rho", "lr_decay"}) {
    app.add_option_function<std::string>(
        hfta::tools::flagOf(key), [&settings, key](const std::string& v) { settings[key] = v; },
        fmt::format("{}: one value, or one per member (comma-separated)", key));
  }
  app.add_option("--scheduler", config.scheduler,
                 "none, step, multistep, exponential, cosine, linear (stepped every epoch), onecycle (every batch) "
                 "or plateau (on each member's held-out loss)");
  for (const auto& setting : hfta::train::scheduleSettings()) {
    app.add_option_function<std::string>(
        hfta::tools::flagOf(setting.name),
        [&schedule_settings, key = setting.name](const std::string& v) { schedule_settings[key] = v; },
        setting.help + "; one value, or one per member");
  }
  auto& options = config.options;
  app.add_option("--epochs", options.epochs);
  app.add_option("--batch-size", options.batch_size);
  app.add_option("--limit", config.limit,
                 "use only the data set's first N samples (0: all), and the test split's first N with --eval");
  app.add_option("--holdout", config.holdout, "the fraction of the data held out for evaluation");
  app.add_option("--seed", options.seed, "shuffling and the held-out split");
  app.add_flag(
      "--own-streams", [&](int64_t) { options.same_batches = false; },
      "each member sees its own shuffled batches (default: all see the same)");
  app.add_option("--loss", options.loss, "cross_entropy, mse or bce_with_logits (the last two on one-hot targets)");
  app.add_option("--dtype", dtype, "float32 (the default) or float64: the module's and the data's dtype");
  app.add_option("--device", device, "cpu (the default), cuda or cuda:N");
  app.add_flag("--amp", amp,
               "mixed precision: the forward under autocast, the float32 weights and optimizer state kept; bfloat16 "
               "on the CPU, float16 with a loss scale per member on CUDA");
  app.add_option("--amp-dtype", amp_dtype,
                 "bfloat16 or float16 (float16 scales each member's loss by its own scale; bfloat16 needs none)");
  app.add_flag("--profiling-executor", options.profiling_executor,
               "run the fused graph under TorchScript's profiling executor (PyTorch's default; by default it runs "
               "as it is, with eager autograd: faster for fused graphs)");
  app.add_flag("--eval", config.eval,
               "after training, each member's top-1 and top-5 accuracy on the data set's test split (CIFAR-10's "
               "test_batch.bin, MNIST's t10k files), else on the held-out samples");
  app.add_option("--out", out, "a folder for metrics.csv and metrics.json");
  app.add_option("--metric", metric, "rank members by held-out accuracy or loss");
  app.add_option("--export-best", export_best, "a folder to write the best member(s) into, as plain .pt files");
  app.add_option("--top", top, "how many members --export-best writes");
  app.add_option("--threads", threads, "intra-op threads (default: all cores)");
  app.add_option("--checkpoint", checkpoint, "the checkpoint folder (default: OUT/checkpoint)");
  app.add_option("--checkpoint-every", checkpoint_every,
                 "write a checkpoint every N epochs (0: only when interrupted)");
  app.add_option("--resume", config.resume, "go on from a checkpoint folder (of a run of the same model)");
  app.add_flag("--auto-resume", auto_resume,
               "go on from the checkpoint folder (--checkpoint) if it holds a checkpoint, else start: for a command "
               "that is restarted as it is (torchrun --max-restarts, a cluster's requeue)");
  app.add_flag("--sync-batch-norm", options.sync_batch_norm,
               "data parallel: batch norm normalizes with the statistics of the whole batch, all ranks' shards "
               "(default: each rank's shard, with rank 0's running statistics)");
  app.add_option("--array-size", config.array_size,
                 "with a plain model.pt (not fused): train this many fresh members of it, re-initialized from --seeds");
  app.add_option("--seeds", seeds, "the members' seeds, one per member (default 0, 1, ...)");
  app.add_option("--config",
                 "a JSON object of these flags (e.g. {\"lr\": [0.01, 0.03], \"epochs\": 5}); "
                 "flags after it on the command line win");

  std::vector<std::string> args;
  try {
    args = hfta::tools::expandConfigFiles(argc, argv);
  } catch (const UserError& e) {
    fmt::print(stderr, "hfta-train: error: {}\n", e.what());
    return hfta::tools::kExitUserError;
  }
  std::vector<char*> expanded;
  for (auto& a : args) expanded.push_back(a.data());
  return hfta::tools::runTool(app, static_cast<int>(expanded.size()), expanded.data(), [&]() -> int {
    try {
      const auto rank_by = hfta::train::rankByName(metric);
      options.dtype = hfta::train::dtypeByName(dtype);
      options.device = hfta::train::deviceByName(device);
      options.amp = hfta::train::ampSetting(amp, amp_dtype, options.device);
      const std::string amp_name = !options.amp ? "none" : *options.amp == at::kHalf ? "float16" : "bfloat16";
      for (const auto& [key, text] : settings) config.hyper.emplace(key, parseValues(hfta::tools::flagOf(key), text));
      for (const auto& [key, text] : schedule_settings) {
        config.schedule_settings.emplace(key, parseValues(hfta::tools::flagOf(key), text));
      }
      for (double seed : seeds.empty() ? std::vector<double>{} : parseValues("--seeds", seeds)) {
        config.seeds.push_back(static_cast<uint64_t>(seed));
      }
      // Data parallel: this process is one rank of a group.
      const auto world = hfta::distributed::worldFromEnvironment();
      std::optional<hfta::distributed::Group> group;
      if (world) {
        // One GPU per rank of a node: cuda means cuda:LOCAL_RANK.
        if (options.device.is_cuda() && !options.device.has_index()) {
          options.device = hfta::train::deviceByName(fmt::format("cuda:{}", world->local_rank));
        }
        group = hfta::distributed::Group::connect(*world, options.device);
        options.group = &*group;
      }
      // Rank 0 reports and writes; the others' reports would repeat it.
      const bool lead = !world || world->rank == 0;
      if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr) throw UserError("cannot quiet stdout");
      if (lead) {
        makeFolder(out);
        makeFolder(export_best);
      }
      if (threads > 0) at::set_num_threads(threads);
      if (checkpoint.empty()) checkpoint = (std::filesystem::path(out.empty() ? "." : out) / "checkpoint").string();
      if (auto_resume) {
        if (!config.resume.empty()) throw UserError("--auto-resume goes on from --checkpoint; drop --resume");
        std::error_code ec;
        if (std::filesystem::exists(checkpoint, ec) || std::filesystem::exists(checkpoint + ".old", ec)) {
          config.resume = checkpoint;
        }
      }

      if (config.data.empty()) {
        config.data = config.dataset.rfind("wikitext", 0) == 0 ? HFTA_CORPUS_PATH : HFTA_DIGITS_PATH;
      }
      hfta::train::Run run(config);
      if (!run.resumeNote().empty()) fmt::print("hfta-train: {}\n", run.resumeNote());
      if (!config.resume.empty()) {
        fmt::print("hfta-train: resumed from {} after epoch {} (batch {} of the next)\n", config.resume,
                   run.progress().epochs_done, run.progress().batches_done);
      }
      // A progress bar where stderr is a terminal; plain epoch lines otherwise.
      const bool show_bar = lead && isatty(STDERR_FILENO) != 0;
      std::signal(SIGINT, requestStop);
      std::signal(SIGTERM, requestStop);
      std::vector<std::string> described;
      for (const auto& [key, text] : settings) described.push_back(key + "=" + text);
      const bool text = !run.trainData().inputs.is_floating_point();
      fmt::print("hfta-train: {} members of {} on {} ({} training, {} held out{}), {} {}\n", run.arraySize(),
                 config.model, run.trainData().name, run.trainData().size(), run.heldOutData().size(),
                 text ? fmt::format("; a vocabulary of {} words", run.trainData().classes) : "", config.optimizer,
                 fmt::join(described, " "));
      if (world) {
        fmt::print("hfta-train: data parallel over {} ranks ({}), batches of {} shared among them; batch norm {}\n",
                   world->size, options.device.is_cuda() ? "NCCL" : "Gloo", options.batch_size,
                   options.sync_batch_norm ? "over the whole batch" : "per rank's shard, rank 0's statistics");
      }
      if (options.amp) {
        fmt::print("hfta-train: mixed precision: {} autocast on {}{}\n", amp_name, options.device.str(),
                   *options.amp == at::kHalf ? ", a loss scale per member" : "");
      }
      double train_seconds = 0;
      int64_t epochs_run = 0;
      const auto start = std::chrono::steady_clock::now();
      // The epoch of the last checkpoint this run wrote (every rank knows it).
      std::optional<int64_t> checkpointed;
      while (!run.finished()) {
        const int64_t epoch_in_flight = run.progress().epochs_done + 1;
        std::vector<MemberEpoch> epoch_rows;
        try {
          epoch_rows = run.nextEpoch([&](int64_t done, int64_t total) {
            if (show_bar) printBar(epoch_in_flight, done, total);
            return g_stop.load();
          });
        } catch (const hfta::distributed::CollectiveError& e) {
          throw UserError(fmt::format(
              "rank {} of {}, epoch {}: {}. {}; restart all ranks with --resume {} (or the same command with "
              "--auto-resume)",
              world->rank, world->size, epoch_in_flight, e.what(),
              checkpointed ? fmt::format("The checkpoint {} (after epoch {}) is intact", checkpoint, *checkpointed)
                           : "No checkpoint was written yet (--checkpoint-every N writes one every N epochs)",
              checkpoint));
        }
        if (show_bar) fmt::print(stderr, "\r\033[K");  // the bar gives way to the epoch's line
        if (epoch_rows.empty()) {
          if (lead) {
            run.saveCheckpoint(checkpoint);
            fmt::print(stderr, "hfta-train: interrupted; checkpoint in {}; go on with --resume {}\n", checkpoint,
                       checkpoint);
          }
          return kExitInterrupted;
        }
        if (checkpoint_every > 0 && epoch_rows[0].epoch % checkpoint_every == 0) {
          if (lead) run.saveCheckpoint(checkpoint);
          checkpointed = epoch_rows[0].epoch;
        }
        fmt::print("{}\n", epochLine(epoch_rows, options.amp == at::kHalf));
        std::fflush(stdout);  // progress shows as it happens, also through a pipe
        if (lead && !out.empty()) hfta::train::writeMetrics(out, run.rows(), amp_name);
        train_seconds += epoch_rows[0].train_seconds;
        ++epochs_run;
      }
      if (epochs_run > 0) {
        fmt::print("hfta-train: {} epochs: {:.2f} s of training ({:.2f} s per epoch{}), {:.2f} s in all\n", epochs_run,
                   train_seconds, train_seconds / epochs_run,
                   world ? fmt::format(", {:.2f} s of it in communication across ranks",
                                       run.communicationSeconds() / epochs_run)
                         : "",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      if (config.eval) {
        const auto evaluations = run.evaluate();
        fmt::print("\nhfta-train: evaluated on {} ({} samples):\n{}", run.evalData().name, run.evalData().size(),
                   hfta::train::evaluationTable(evaluations));
        if (lead && !out.empty()) hfta::train::writeEvaluation(out, evaluations, run.evalData().name);
      }
      const auto ranked = hfta::train::rankMembers(run.rows(), run.arraySize(), rank_by);
      if (ranked.empty()) return 0;
      fmt::print("\n{}", hfta::train::leaderboard(ranked));
      if (lead && !export_best.empty()) {
        std::vector<int64_t> best;
        for (const auto& r : ranked) {
          if (static_cast<int64_t>(best.size()) == top || r.diverged) break;
          best.push_back(r.member);
        }
        const auto paths = run.exportMembers(best, export_best);
        for (size_t i = 0; i < paths.size(); ++i) {
          fmt::print("hfta-train: wrote member {} (rank {}) to {}\n", best[i], i + 1, paths[i]);
        }
      }
      if (!out.empty()) fmt::print("hfta-train: metrics in {}/metrics.csv and metrics.json\n", out);
      return 0;
    } catch (const hfta::train::SettingError& e) {
      throw UserError(fmt::format("{}: {}", hfta::tools::flagOf(e.setting()), e.problem()));
    } catch (const hfta::distributed::CollectiveError& e) {  // outside an epoch: starting, or --eval
      throw UserError(fmt::format("{}; restart all ranks", e.what()));
    }
  });
}
