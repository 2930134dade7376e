// hfta-train: trains a fused array (from hfta-fuse) on a data set, every
// member with its own hyper-parameters, and reports each member's metrics.
//
//   hfta-train fused.pt --lr 0.01,0.03,0.1,0.3 --optimizer adam --epochs 5 --out runs/sweep
//
// Writes OUT/metrics.csv and OUT/metrics.json (per epoch and member), prints
// the members ranked by the chosen metric, and --export-best DIR writes the
// best member(s) as plain .pt files.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "passes/hfta/hfta.h"
#include "runtime/allocator.h"
#include "tools/tool_main.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/optimizer_factory.h"
#include "train/reinit.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace {

using hfta::UserError;

// Set by SIGINT / SIGTERM: the run stops after the batch in flight and
// writes a checkpoint.
std::atomic<bool> g_stop{false};
extern "C" void requestStop(int) { g_stop = true; }
constexpr int kExitInterrupted = 130;
using hfta::train::MemberEpoch;

// "0.01,0.03" -> {0.01, 0.03}; one value stands for every member.
hfta::PerMember parseValues(const std::string& flag, const std::string& text) {
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

// `--config FILE` (a JSON object of flag names without the dashes, e.g.
// {"optimizer": "adam", "lr": [0.01, 0.03], "epochs": 5, "own-streams": true})
// becomes those flags, in place; flags after it on the command line win.
std::vector<std::string> expandConfig(int argc, char** argv) {
  std::vector<std::string> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--config") {
      args.push_back(arg);
      continue;
    }
    if (i + 1 >= argc) throw UserError("--config needs a JSON file");
    const std::string path = argv[++i];
    std::ifstream in(path);
    if (!in) throw UserError(fmt::format("--config: cannot read {}", path));
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("--config: {} is not JSON: {}", path, e.what()));
    }
    if (!config.is_object()) throw UserError(fmt::format("--config: {} must hold one JSON object", path));
    for (const auto& [key, value] : config.items()) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (value.is_boolean()) {
        if (value.get<bool>()) args.push_back(flag);
        continue;
      }
      std::string text;
      const auto items = value.is_array() ? value : nlohmann::json::array({value});
      for (const auto& item : items) {
        if (!text.empty()) text += ",";
        text += item.is_string() ? item.get<std::string>() : item.dump();
      }
      args.push_back(flag);
      args.push_back(text);
    }
  }
  return args;
}

void printBar(int64_t epoch, int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  fmt::print(stderr, "\repoch {:>3} [{}{}] {}/{} batches", epoch, std::string(filled, '#'),
             std::string(kWidth - filled, '.'), done, total);
  std::fflush(stderr);
}

std::string csvOf(const std::vector<MemberEpoch>& rows) {
  std::string out = "epoch,member,train_loss,heldout_loss,heldout_accuracy,lr,seconds,diverged\n";
  for (const auto& r : rows) {
    out += fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.3f},{}\n", r.epoch, r.member, r.train_loss,
                       r.heldout_loss, r.heldout_accuracy, r.lr, r.seconds, r.diverged ? 1 : 0);
  }
  return out;
}

std::string jsonOf(const std::vector<MemberEpoch>& rows) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"epoch", r.epoch}, {"member", r.member}, {"train_loss", r.train_loss},
                   {"heldout_loss", r.heldout_loss}, {"heldout_accuracy", r.heldout_accuracy}, {"lr", r.lr},
                   {"seconds", r.seconds}, {"diverged", r.diverged}});
  }
  return out.dump(2) + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  hfta::keepLargeAllocations();  // a fused array's large activations, reused every step
  CLI::App app{"Train the members of a fused module (from hfta-fuse), each with its own hyper-parameters.",
               "hfta-train"};
  std::string model, dataset = "digits", data = HFTA_DIGITS_PATH, optimizer = "sgd", out, export_best,
                     metric = "accuracy", scheduler = "none", loss = "cross_entropy";
  std::map<std::string, std::string> settings;           // optimizer setting name -> values
  std::map<std::string, std::string> schedule_settings;  // schedule setting name -> values
  hfta::train::TrainOptions options;
  double holdout = 0.2;
  int threads = 0;
  int64_t top = 1;
  int64_t limit = 0;
  app.add_option("model", model, "the fused module (.pt) written by hfta-fuse")->required();
  app.add_option("--dataset", dataset, "digits (the default, shipped), mnist, cifar10 or synthetic");
  app.add_option("--data", data, "the data set's file (digits) or folder (mnist, cifar10)");
  app.add_option("--optimizer", optimizer, "sgd, adam, adamw, adagrad, rmsprop or adadelta");
  for (const char* key : {"lr", "momentum", "weight_decay", "beta1", "beta2", "eps", "dampening", "nesterov",
                          "amsgrad", "alpha", "centered", "rho", "lr_decay"}) {
    app.add_option_function<std::string>(hfta::train::flagOf(key),
                                         [&settings, key](const std::string& v) { settings[key] = v; },
                                         fmt::format("{}: one value, or one per member (comma-separated)", key));
  }
  app.add_option("--scheduler", scheduler,
                 "none, step, multistep, exponential, cosine, linear (stepped every epoch), onecycle (every batch) "
                 "or plateau (on each member's held-out loss)");
  for (const auto& setting : hfta::train::scheduleSettings()) {
    app.add_option_function<std::string>(
        hfta::train::flagOf(setting.name),
        [&schedule_settings, key = setting.name](const std::string& v) { schedule_settings[key] = v; },
        setting.help + "; one value, or one per member");
  }
  app.add_option("--epochs", options.epochs);
  app.add_option("--batch-size", options.batch_size);
  app.add_option("--limit", limit, "use only the data set's first N samples (0: all)");
  app.add_option("--holdout", holdout, "the fraction of the data held out for evaluation");
  app.add_option("--seed", options.seed, "shuffling and the held-out split");
  app.add_flag("--own-streams", [&](int64_t) { options.same_batches = false; },
               "each member sees its own shuffled batches (default: all see the same)");
  app.add_option("--loss", options.loss, "cross_entropy, mse or bce_with_logits (the last two on one-hot targets)");
  app.add_option("--out", out, "a folder for metrics.csv and metrics.json");
  app.add_option("--metric", metric, "rank members by held-out accuracy or loss");
  app.add_option("--export-best", export_best, "a folder to write the best member(s) into, as plain .pt files");
  app.add_option("--top", top, "how many members --export-best writes");
  app.add_option("--threads", threads, "intra-op threads (default: all cores)");
  std::string checkpoint, resume;
  int64_t checkpoint_every = 0;
  app.add_option("--checkpoint", checkpoint, "the checkpoint folder (default: OUT/checkpoint)");
  app.add_option("--checkpoint-every", checkpoint_every, "write a checkpoint every N epochs (0: only when interrupted)");
  app.add_option("--resume", resume, "go on from a checkpoint folder (the model argument is then not read)");
  int64_t array_size = 0;
  std::string seeds;
  app.add_option("--array-size", array_size,
                 "with a plain model.pt (not fused): train this many fresh members of it, re-initialized from --seeds");
  app.add_option("--seeds", seeds, "the members' seeds, one per member (default 0, 1, ...)");
  app.add_option("--config", "a JSON object of these flags (e.g. {\"lr\": [0.01, 0.03], \"epochs\": 5}); "
                             "flags after it on the command line win");

  std::vector<std::string> args;
  try {
    args = expandConfig(argc, argv);
  } catch (const UserError& e) {
    fmt::print(stderr, "hfta-train: error: {}\n", e.what());
    return hfta::tools::kExitUserError;
  }
  std::vector<char*> expanded;
  for (auto& a : args) expanded.push_back(a.data());
  return hfta::tools::runTool(app, static_cast<int>(expanded.size()), expanded.data(), [&] {
    if (metric != "accuracy" && metric != "loss") throw UserError("--metric is accuracy or loss");
    for (const auto& dir : {out, export_best}) {
      std::error_code ec;
      if (!dir.empty() && !std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directories(dir, ec)) {
        throw UserError(fmt::format("cannot create the folder {}", dir));
      }
    }
    if (threads > 0) at::set_num_threads(threads);
    if (checkpoint.empty()) checkpoint = (std::filesystem::path(out.empty() ? "." : out) / "checkpoint").string();
    auto fused = resume.empty() ? hfta::loadMembers({model})[0].module : hfta::train::loadCheckpointModule(resume);
    if (!fused.hasattr("hfta_array_size")) {  // a plain model: make the members here
      if (array_size < 1) {
        throw UserError(fmt::format("{} is a plain model, not one made by hfta-fuse: give --array-size B (and "
                                    "--seeds) to train B fresh members of it, or fuse B models first", model));
      }
      std::vector<double> member_seeds;
      if (seeds.empty()) {
        for (int64_t b = 0; b < array_size; ++b) member_seeds.push_back(static_cast<double>(b));
      } else {
        const auto given = parseValues("--seeds", seeds);
        try {
          given.check(array_size, "--seeds");
        } catch (const std::invalid_argument& e) {
          throw UserError(e.what());
        }
        member_seeds = given.expanded(array_size);
      }
      std::vector<hfta::Member> members;
      for (int64_t b = 0; b < array_size; ++b) {
        const auto seed = static_cast<uint64_t>(member_seeds[b]);
        members.push_back({hfta::train::reinitialized(fused, seed), fmt::format("{} (seed {})", model, seed)});
      }
      hfta::FuseOptions fuse_options;
      fuse_options.allow_single_member = true;
      fused = hfta::fuse(members, fuse_options).module;
    } else if (array_size > 0 && array_size != hfta::arraySize(fused)) {
      throw UserError(fmt::format("--array-size {} does not match the {} members of {}", array_size,
                                  hfta::arraySize(fused), model));
    }
    const int64_t members = hfta::arraySize(fused);
    auto all = hfta::train::loadDataset(dataset, data);
    if (limit < 0) throw UserError("--limit must be >= 0");
    if (limit > 0 && limit < all.size()) all = all.slice(0, limit);
    const auto [train, heldout] = hfta::train::holdOut(all, holdout, options.seed);

    hfta::optim::Hyper hyper;
    for (const auto& [key, text] : settings) hyper.emplace(key, parseValues(hfta::train::flagOf(key), text));
    std::vector<at::Tensor> params;
    for (const auto& p : fused.parameters()) params.push_back(p);
    auto opt = hfta::train::makeOptimizer(optimizer, params, members, hyper);
    std::map<std::string, hfta::PerMember> schedule_values;
    for (const auto& [key, text] : schedule_settings) {
      schedule_values.emplace(key, parseValues(hfta::train::flagOf(key), text));
    }
    const int64_t batches_per_epoch =
        (train.size() + options.batch_size - 1) / std::max<int64_t>(options.batch_size, 1);
    auto schedule = hfta::train::Schedule::make(scheduler, schedule_values, *opt, options.epochs, batches_per_epoch);

    hfta::train::Trainer trainer(fused, *opt, options);
    trainer.setSchedule(schedule.get());
    std::vector<MemberEpoch> rows;
    if (!resume.empty()) {
      auto resumed = hfta::train::loadCheckpointState(resume, *opt, schedule.get());
      rows = std::move(resumed.rows);
      trainer.restore(std::move(resumed.progress));
      fmt::print("hfta-train: resumed from {} after epoch {} (batch {} of the next)\n", resume,
                 trainer.progress().epochs_done, trainer.progress().batches_done);
    }
    // A progress bar where stderr is a terminal; plain epoch lines otherwise.
    const bool show_bar = isatty(STDERR_FILENO) != 0;
    std::signal(SIGINT, requestStop);
    std::signal(SIGTERM, requestStop);
    std::vector<std::string> described;
    for (const auto& [key, text] : settings) described.push_back(key + "=" + text);
    fmt::print("hfta-train: {} members of {} on {} ({} training, {} held out), {} {}\n", members, model, all.name,
               train.size(), heldout.size(), optimizer, fmt::join(described, " "));
    while (trainer.progress().epochs_done < options.epochs) {
      const int64_t epoch_in_flight = trainer.progress().epochs_done + 1;
      const auto epoch_rows = trainer.runEpoch(train, heldout, [&](int64_t done, int64_t total) {
        if (show_bar) printBar(epoch_in_flight, done, total);
        return g_stop.load();
      });
      if (show_bar) fmt::print(stderr, "\r\033[K");  // the bar gives way to the epoch's line
      if (epoch_rows.empty()) {
        hfta::train::saveCheckpoint(checkpoint, trainer.module(), *opt, schedule.get(), trainer.progress(), rows);
        fmt::print(stderr, "hfta-train: interrupted; checkpoint in {}; go on with --resume {}\n", checkpoint,
                   checkpoint);
        return kExitInterrupted;
      }
      rows.insert(rows.end(), epoch_rows.begin(), epoch_rows.end());
      const int64_t epoch = trainer.progress().epochs_done;
      if (checkpoint_every > 0 && epoch % checkpoint_every == 0) {
        hfta::train::saveCheckpoint(checkpoint, trainer.module(), *opt, schedule.get(), trainer.progress(), rows);
      }
      std::string line = fmt::format("epoch {:>3} ({:.1f} s):", epoch, epoch_rows[0].seconds);
      for (const auto& r : epoch_rows) {
        line += r.diverged ? fmt::format("  m{} diverged", r.member)
                           : fmt::format("  m{} {:.3f}/{:.1f}%", r.member, r.heldout_loss, 100 * r.heldout_accuracy);
      }
      fmt::print("{}\n", line);
      std::fflush(stdout);  // progress shows as it happens, also through a pipe
      if (!out.empty()) {
        hfta::tools::writeTextFile(out + "/metrics.csv", csvOf(rows));
        hfta::tools::writeTextFile(out + "/metrics.json", jsonOf(rows));
      }
    }
    if (rows.empty()) return 0;
    // The last epoch's rows, best first; diverged members last.
    std::vector<MemberEpoch> last(rows.end() - members, rows.end());
    std::stable_sort(last.begin(), last.end(), [&](const MemberEpoch& a, const MemberEpoch& b) {
      if (a.diverged != b.diverged) return !a.diverged;
      if (metric == "accuracy" && a.heldout_accuracy != b.heldout_accuracy) {
        return a.heldout_accuracy > b.heldout_accuracy;
      }
      return a.heldout_loss < b.heldout_loss;  // (ties in accuracy too)
    });
    fmt::print("\n{:>4}  {:>6}  {:>10}  {:>12}  {:>12}  {}\n", "rank", "member", "lr", "held-out acc", "held-out loss",
               "status");
    for (size_t i = 0; i < last.size(); ++i) {
      const auto& r = last[i];
      fmt::print("{:>4}  {:>6}  {:>10.4g}  {:>11.2f}%  {:>12.4f}  {}\n", i + 1, r.member, r.lr,
                 100 * r.heldout_accuracy, r.heldout_loss, r.diverged ? "diverged (frozen)" : "ok");
    }
    if (!export_best.empty()) {
      for (int64_t i = 0; i < std::min<int64_t>(top, members); ++i) {
        if (last[i].diverged) break;
        const auto path = (std::filesystem::path(export_best) / fmt::format("member_{}.pt", last[i].member)).string();
        hfta::saveModule(hfta::split(trainer.module(), last[i].member), path);
        fmt::print("hfta-train: wrote member {} (rank {}) to {}\n", last[i].member, i + 1, path);
      }
    }
    if (!out.empty()) fmt::print("hfta-train: metrics in {}/metrics.csv and metrics.json\n", out);
    return 0;
  });
}
