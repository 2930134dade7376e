// hfta-train: trains a fused array (from hfta-fuse) on a data set, every
// member with its own hyper-parameters, and reports each member's metrics.
//
//   hfta-train fused.pt --lr 0.01,0.03,0.1,0.3 --optimizer adam --epochs 5 --out runs/sweep
//
// Writes OUT/metrics.csv and OUT/metrics.json (per epoch and member), prints
// the members ranked by the chosen metric, and --export-best DIR writes the
// best member(s) as plain .pt files. The run itself is run/run.h; this is
// its command line.
//
// Under torchrun (or with torchrun's RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set by hand) each process is one rank of a data-parallel run
// (docs/distributed.md): rank 0 reports and writes the metrics, checkpoints
// and exported members; every rank prints its errors.
//
//   torchrun --standalone --nproc-per-node 2 --no-python hfta-train fused.pt --lr 0.01,0.1 --out runs/dp
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>

#include "distributed/world.h"
#include "run/run.h"
#include "support/allocator.h"
#include "support/user_error.h"
#include "tools/run_flags.h"
#include "tools/tool_main.h"
#include "train/metrics.h"

namespace {

using hfta::UserError;
using hfta::train::MemberEpoch;

// Set by SIGINT / SIGTERM: the run stops after the batch in flight and
// writes a checkpoint.
std::atomic<bool> g_stop{false};
extern "C" void requestStop(int) { g_stop = true; }
constexpr int kExitInterrupted = 130;

// The command line, parsed.
struct TrainCommand {
  hfta::train::RunConfig config;
  hfta::tools::RunFlags run_flags;
  hfta::tools::MemberSettingFlags member_settings;
  std::string out, export_best, seeds, checkpoint;
  bool auto_resume = false;
  int64_t top = 1, checkpoint_every = 0;
};

void addTrainFlags(CLI::App& app, TrainCommand& c) {
  auto& config = c.config;
  auto& options = config.options;
  app.add_option("model", config.model, "the fused module (.pt) written by hfta-fuse")->required();
  c.run_flags.metric = "accuracy";  // the default
  hfta::tools::addRunFlags(app, config, c.run_flags);
  hfta::tools::addMemberSettingFlags(app, c.member_settings);
  app.add_option("--epochs", options.epochs);
  app.add_option("--seed", options.seed, "shuffling and the held-out split");
  app.add_flag(
      "--own-streams", [&options](int64_t) { options.same_batches = false; },
      "each member sees its own shuffled batches (default: all see the same)");
  app.add_flag("--profiling-executor", options.profiling_executor,
               "run the fused graph under TorchScript's profiling executor (PyTorch's default; by default it runs "
               "as it is, with eager autograd: faster for fused graphs)");
  app.add_flag("--eval", config.eval,
               "after training, each member's top-1 and top-5 accuracy on the data set's test split (CIFAR-10's "
               "test_batch.bin, MNIST's t10k files), else on the held-out samples");
  app.add_option("--out", c.out, "a folder for metrics.csv and metrics.json");
  app.add_option("--export-best", c.export_best, "a folder to write the best member(s) into, as plain .pt files");
  app.add_option("--top", c.top, "how many members --export-best writes");
  app.add_option("--checkpoint", c.checkpoint, "the checkpoint folder (default: OUT/checkpoint)");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "write a checkpoint every N epochs (0: only when interrupted)");
  app.add_option("--resume", config.resume, "go on from a checkpoint folder (of a run of the same model)");
  app.add_flag("--auto-resume", c.auto_resume,
               "go on from the checkpoint folder (--checkpoint) if it holds a checkpoint, else start: for a command "
               "that is restarted as it is (torchrun --max-restarts, a cluster's requeue)");
  app.add_flag("--sync-batch-norm", options.sync_batch_norm,
               "data parallel: batch norm normalizes with the statistics of the whole batch, all ranks' shards "
               "(default: each rank's shard, with rank 0's running statistics)");
  app.add_option("--array-size", config.array_size,
                 "with a plain model.pt (not fused): train this many fresh members of it, re-initialized from --seeds");
  app.add_option("--seeds", c.seeds, "the members' seeds, one per member (default 0, 1, ...)");
}

void makeFolder(const std::string& dir) {
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directories(dir, ec)) {
    throw UserError(fmt::format("cannot create the folder {}", dir));
  }
}

// Data parallel: this process is one rank of a group (torchrun's
// environment), which `options` then trains with.
struct Ranks {
  std::optional<hfta::distributed::World> world;
  std::optional<hfta::distributed::Group> group;
  bool lead() const { return !world || world->rank == 0; }  // reports and writes
};

void joinRanks(Ranks& ranks, hfta::train::TrainOptions& options) {
  ranks.world = hfta::distributed::worldFromEnvironment();
  if (!ranks.world) return;
  // One GPU per rank of a node: cuda means cuda:LOCAL_RANK.
  if (options.device.is_cuda() && !options.device.has_index()) {
    options.device = hfta::train::deviceByName(fmt::format("cuda:{}", ranks.world->local_rank));
  }
  ranks.group = hfta::distributed::Group::connect(*ranks.world, options.device);
  options.group = &*ranks.group;
}

// Fills in what the flags leave to be worked out: the per-member settings,
// the seeds, the checkpoint folder, --auto-resume's choice.
void completeConfig(TrainCommand& c) {
  hfta::tools::applyMemberSettingFlags(c.member_settings, c.config);
  for (double seed : c.seeds.empty() ? std::vector<double>{} : hfta::tools::parseValues("--seeds", c.seeds)) {
    c.config.seeds.push_back(static_cast<uint64_t>(seed));
  }
  if (c.checkpoint.empty()) c.checkpoint = (std::filesystem::path(c.out.empty() ? "." : c.out) / "checkpoint").string();
  if (c.auto_resume) {
    if (!c.config.resume.empty()) throw UserError("--auto-resume goes on from --checkpoint; drop --resume");
    std::error_code ec;
    if (std::filesystem::exists(c.checkpoint, ec) || std::filesystem::exists(c.checkpoint + ".old", ec)) {
      c.config.resume = c.checkpoint;
    }
  }
}

std::string ampName(const hfta::train::TrainOptions& options) {
  return !options.amp ? "none" : *options.amp == at::kHalf ? "float16" : "bfloat16";
}

void printStart(const TrainCommand& c, const hfta::train::Run& run, const Ranks& ranks) {
  const auto& config = c.config;
  const auto& options = config.options;
  if (!run.resumeNote().empty()) fmt::print("hfta-train: {}\n", run.resumeNote());
  if (!config.resume.empty()) {
    fmt::print("hfta-train: resumed from {} after epoch {} (batch {} of the next)\n", config.resume,
               run.progress().epochs_done, run.progress().batches_done);
  }
  std::vector<std::string> described;
  for (const auto& [key, text] : c.member_settings.optimizer) described.push_back(key + "=" + text);
  const bool text = !run.trainData().inputs.is_floating_point();
  fmt::print("hfta-train: {} members of {} on {} ({} training, {} held out{}), {} {}\n", run.arraySize(), config.model,
             run.trainData().name, run.trainData().size(), run.heldOutData().size(),
             text ? fmt::format("; a vocabulary of {} words", run.trainData().classes) : "", config.optimizer,
             fmt::join(described, " "));
  if (ranks.world) {
    fmt::print("hfta-train: data parallel over {} ranks ({}), batches of {} shared among them; batch norm {}\n",
               ranks.world->size, options.device.is_cuda() ? "NCCL" : "Gloo", options.batch_size,
               options.sync_batch_norm ? "over the whole batch" : "per rank's shard, rank 0's statistics");
  }
  if (options.amp) {
    fmt::print("hfta-train: mixed precision: {} autocast on {}{}\n", ampName(options), options.device.str(),
               *options.amp == at::kHalf ? ", a loss scale per member" : "");
  }
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

// The epochs left, each reported as it ends; false if a signal stopped the
// run (its checkpoint written).
bool trainEpochs(const TrainCommand& c, hfta::train::Run& run, const Ranks& ranks) {
  const auto& options = c.config.options;
  const bool show_bar = ranks.lead() && isatty(STDERR_FILENO) != 0;  // else plain epoch lines
  double train_seconds = 0;
  int64_t epochs_run = 0;
  const auto start = std::chrono::steady_clock::now();
  std::optional<int64_t> checkpointed;  // the epoch of the last checkpoint this run wrote (every rank knows it)
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
          ranks.world->rank, ranks.world->size, epoch_in_flight, e.what(),
          checkpointed ? fmt::format("The checkpoint {} (after epoch {}) is intact", c.checkpoint, *checkpointed)
                       : "No checkpoint was written yet (--checkpoint-every N writes one every N epochs)",
          c.checkpoint));
    }
    if (show_bar) fmt::print(stderr, "\r\033[K");  // the bar gives way to the epoch's line
    if (epoch_rows.empty()) {
      if (ranks.lead()) {
        run.saveCheckpoint(c.checkpoint);
        fmt::print(stderr, "hfta-train: interrupted; checkpoint in {}; go on with --resume {}\n", c.checkpoint,
                   c.checkpoint);
      }
      return false;
    }
    if (c.checkpoint_every > 0 && epoch_rows[0].epoch % c.checkpoint_every == 0) {
      if (ranks.lead()) run.saveCheckpoint(c.checkpoint);
      checkpointed = epoch_rows[0].epoch;
    }
    fmt::print("{}\n", epochLine(epoch_rows, options.amp == at::kHalf));
    std::fflush(stdout);  // progress shows as it happens, also through a pipe
    if (ranks.lead() && !c.out.empty()) hfta::train::writeMetrics(c.out, run.rows(), ampName(options));
    train_seconds += epoch_rows[0].train_seconds;
    ++epochs_run;
  }
  if (epochs_run > 0) {
    fmt::print("hfta-train: {} epochs: {:.2f} s of training ({:.2f} s per epoch{}), {:.2f} s in all\n", epochs_run,
               train_seconds, train_seconds / epochs_run,
               ranks.world ? fmt::format(", {:.2f} s of it in communication across ranks",
                                         run.communicationSeconds() / epochs_run)
                           : "",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return true;
}

// --eval, the leaderboard and --export-best.
void finish(const TrainCommand& c, hfta::train::Run& run, const Ranks& ranks, hfta::train::RankBy rank_by) {
  if (c.config.eval) {
    const auto evaluations = run.evaluate();
    fmt::print("\nhfta-train: evaluated on {} ({} samples):\n{}", run.evalData().name, run.evalData().size(),
               hfta::train::evaluationTable(evaluations));
    if (ranks.lead() && !c.out.empty()) hfta::train::writeEvaluation(c.out, evaluations, run.evalData().name);
  }
  const auto ranked = hfta::train::rankMembers(run.rows(), run.arraySize(), rank_by);
  if (ranked.empty()) return;
  fmt::print("\n{}", hfta::train::leaderboard(ranked));
  if (ranks.lead() && !c.export_best.empty()) {
    std::vector<int64_t> best;
    for (const auto& r : ranked) {
      if (static_cast<int64_t>(best.size()) == c.top || r.diverged) break;
      best.push_back(r.member);
    }
    const auto paths = run.exportMembers(best, c.export_best);
    for (size_t i = 0; i < paths.size(); ++i) {
      fmt::print("hfta-train: wrote member {} (rank {}) to {}\n", best[i], i + 1, paths[i]);
    }
  }
  if (!c.out.empty()) fmt::print("hfta-train: metrics in {}/metrics.csv and metrics.json\n", c.out);
}

int train(TrainCommand& c) {
  const auto rank_by = hfta::tools::applyRunFlags(c.run_flags, c.config);
  completeConfig(c);
  Ranks ranks;
  try {
    joinRanks(ranks, c.config.options);
    if (!ranks.lead() && std::freopen("/dev/null", "w", stdout) == nullptr) throw UserError("cannot quiet stdout");
    if (ranks.lead()) {
      makeFolder(c.out);
      makeFolder(c.export_best);
    }
    hfta::train::Run run(c.config);
    printStart(c, run, ranks);
    std::signal(SIGINT, requestStop);
    std::signal(SIGTERM, requestStop);
    if (!trainEpochs(c, run, ranks)) return kExitInterrupted;
    finish(c, run, ranks, rank_by);
    return 0;
  } catch (const hfta::distributed::CollectiveError& e) {  // outside an epoch: starting, or --eval
    throw UserError(fmt::format("{}; restart all ranks", e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();  // a fused array's large activations, reused every step
  CLI::App app{"Train the members of a fused module (from hfta-fuse), each with its own hyper-parameters.",
               "hfta-train"};
  TrainCommand command;
  addTrainFlags(app, command);
  std::vector<std::string> args;
  return hfta::tools::runTrainingTool(app, argc, argv, args, [&] { return train(command); });
}
