#include "tools/run_flags.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <sstream>

#include "tools/tool_main.h"
#include "train/optimizers.h"
#include "train/schedule.h"
#include "train/setting_error.h"

namespace hfta::tools {

void addRunFlags(CLI::App& app, train::RunConfig& config, RunFlags& flags) {
  app.add_option("--dataset", config.dataset,
                 "digits (the default, shipped), mnist, cifar10, synthetic, or text in WikiText-2's format: wikitext "
                 "(next word) or wikitext-mlm (masked words, BERT)");
  app.add_option("--data", config.data,
                 "the data set's file (digits) or folder (mnist, cifar10, wikitext: default the shipped English "
                 "corpus)");
  app.add_option("--sequence-length", config.sequence_length, "tokens per sequence (text data; default 35)");
  app.add_option("--limit", config.limit,
                 "use only the data set's first N samples (0: all), and the test split's first N with --eval");
  app.add_option("--holdout", config.holdout, "the fraction of the data held out for evaluation and ranking");
  app.add_option("--batch-size", config.options.batch_size);
  app.add_option("--loss", config.options.loss,
                 "cross_entropy, mse or bce_with_logits (the last two on one-hot targets)");
  app.add_option("--optimizer", config.optimizer, train::optimizerNames() + " (default sgd)");
  app.add_option("--scheduler", config.scheduler,
                 "none, step, multistep, exponential, cosine, linear (stepped every epoch), onecycle (every batch) "
                 "or plateau (on each member's held-out loss)");
  app.add_option("--dtype", flags.dtype, "float32 (the default) or float64: the module's and the data's dtype");
  app.add_option("--device", flags.device, "cpu (the default), cuda or cuda:N");
  app.add_flag("--amp", flags.amp,
               "mixed precision: the forward under autocast, the float32 weights and optimizer state kept; bfloat16 "
               "on the CPU, float16 with a loss scale per member on CUDA");
  app.add_option("--amp-dtype", flags.amp_dtype,
                 "bfloat16 or float16 (float16 scales each member's loss by its own scale; bfloat16 needs none)");
  app.add_option("--metric", flags.metric, fmt::format("rank by held-out accuracy or loss (default {})", flags.metric));
  app.add_option("--threads", flags.threads, "intra-op threads (default: all cores)");
  app.add_option("--config",
                 "a JSON object of these flags (e.g. {\"lr\": [0.01, 0.03], \"epochs\": 5}); "
                 "flags after it on the command line win");
}

train::RankBy applyRunFlags(const RunFlags& flags, train::RunConfig& config) {
  auto& options = config.options;
  options.dtype = train::dtypeByName(flags.dtype);
  options.device = train::deviceByName(flags.device);
  options.amp = train::ampSetting(flags.amp, flags.amp_dtype, options.device);
  if (config.data.empty()) {
    config.data = config.dataset.rfind("wikitext", 0) == 0 ? HFTA_CORPUS_PATH : HFTA_DIGITS_PATH;
  }
  if (flags.threads > 0) at::set_num_threads(flags.threads);
  return train::rankByName(flags.metric);
}

void addMemberSettingFlags(CLI::App& app, MemberSettingFlags& flags) {
  for (const auto& setting : train::optimizerSettings()) {
    app.add_option_function<std::string>(
        flagOf(setting.name), [&flags, key = setting.name](const std::string& v) { flags.optimizer[key] = v; },
        setting.help + "; one value, or one per member (comma-separated)");
  }
  for (const auto& setting : train::scheduleSettings()) {
    app.add_option_function<std::string>(
        flagOf(setting.name), [&flags, key = setting.name](const std::string& v) { flags.schedule[key] = v; },
        setting.help + "; one value, or one per member");
  }
}

void applyMemberSettingFlags(const MemberSettingFlags& flags, train::RunConfig& config) {
  for (const auto& [key, text] : flags.optimizer) config.hyper.emplace(key, parseValues(flagOf(key), text));
  for (const auto& [key, text] : flags.schedule) config.schedule_settings.emplace(key, parseValues(flagOf(key), text));
}

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

int runTrainingTool(CLI::App& app, int argc, char** argv, std::vector<std::string>& args,
                    const std::function<int()>& body,
                    const std::function<std::vector<std::string>(std::vector<std::string>)>& rewrite) {
  try {
    args = expandConfigFiles(argc, argv);
    if (rewrite) args = rewrite(std::move(args));
  } catch (const UserError& e) {
    fmt::print(stderr, "{}: error: {}\n", app.get_name(), e.what());
    return kExitUserError;
  }
  std::vector<char*> expanded;
  for (auto& a : args) expanded.push_back(a.data());
  return runTool(app, static_cast<int>(expanded.size()), expanded.data(), [&] {
    try {
      return body();
    } catch (const train::SettingError& e) {
      throw UserError(fmt::format("{}: {}", flagOf(e.setting()), e.problem()));
    }
  });
}

}  // namespace hfta::tools
