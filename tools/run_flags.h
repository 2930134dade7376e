#pragma once
// What hfta-train and hfta-tune share: the flags of a training run (the
// data, the loss, the optimizer and schedule, the precision, the device,
// the metric, the threads), declared once so that both take and describe
// them alike, and how they run (--config files, a setting's error reported
// under its flag).
#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "run/run.h"
#include "train/metrics.h"

namespace hfta::tools {

// The shared flags that need a conversion after parsing.
struct RunFlags {
  std::string dtype = "float32", device = "cpu", amp_dtype, metric;
  bool amp = false;
  int threads = 0;
};
void addRunFlags(CLI::App& app, train::RunConfig& config, RunFlags& flags);
// The dtype, device and precision into config.options, the shipped data
// set's path where none is given, the thread count; returns the metric to
// rank members by. SettingError for a bad value.
train::RankBy applyRunFlags(const RunFlags& flags, train::RunConfig& config);

// hfta-train's per-member settings: a flag per optimizer setting (--lr,
// --momentum, ...) and per schedule setting, each one value or one per
// member, comma-separated.
struct MemberSettingFlags {
  std::map<std::string, std::string> optimizer, schedule;  // setting -> its text
};
void addMemberSettingFlags(CLI::App& app, MemberSettingFlags& flags);
void applyMemberSettingFlags(const MemberSettingFlags& flags, train::RunConfig& config);

// "0.01,0.03" -> {0.01, 0.03}; UserError naming `flag` if it is not that.
std::vector<double> parseValues(const std::string& flag, const std::string& text);

// runTool (tools/tool_main.h) on the command line with its --config files
// expanded and then `rewrite` applied (when given); `args` holds the
// command line that runs. A SettingError from `body` names its flag.
int runTrainingTool(CLI::App& app, int argc, char** argv, std::vector<std::string>& args,
                    const std::function<int()>& body,
                    const std::function<std::vector<std::string>(std::vector<std::string>)>& rewrite = {});

}  // namespace hfta::tools
