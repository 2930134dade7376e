#include "tune/tune_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "support/atomic_file.h"
#include "support/user_error.h"
#include "tune/tuner.h"

namespace hfta::tune {
namespace {

std::string settingText(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string trialsCsv(const Tuner& tuner) {
  std::set<std::string> names;
  for (const auto& [id, t] : tuner.trials()) {
    for (const auto& [name, v] : t.settings) names.insert(name);
  }
  std::string csv = fmt::format("trial,group,status,epochs,heldout_loss,heldout_accuracy,{}\n", fmt::join(names, ","));
  for (const auto& [id, t] : tuner.trials()) {
    std::vector<std::string> values;
    for (const auto& name : names) values.push_back(t.settings.count(name) ? settingText(t.settings.at(name)) : "");
    const auto* last = t.rows.empty() ? nullptr : &t.rows.back();
    csv += fmt::format("{},{},{},{},{},{},{}\n", id, t.group, t.status, t.epochs,
                       last ? fmt::format("{:.6g}", last->heldout_loss) : "",
                       last ? fmt::format("{:.6g}", last->heldout_accuracy) : "", fmt::join(values, ","));
  }
  return csv;
}

std::string trialsJson(const Tuner& tuner) {
  auto all = nlohmann::json::array();
  for (const auto& [id, t] : tuner.trials()) {
    nlohmann::json trial = {{"trial", id}, {"group", t.group}, {"status", t.status}, {"epochs", t.epochs}};
    trial["settings"] = t.settings;
    trial["member_seed"] = t.config.seeds.at(0);
    trial["model"] = t.config.model;
    trial["metrics"] = nlohmann::json::array();
    for (const auto& r : t.rows) {
      trial["metrics"].push_back({{"epoch", r.epoch},
                                  {"train_loss", r.train_loss},
                                  {"heldout_loss", r.heldout_loss},
                                  {"heldout_accuracy", r.heldout_accuracy},
                                  {"lr", r.lr},
                                  {"diverged", r.diverged}});
    }
    trial["rungs"] = nlohmann::json::array();
    for (const auto& d : tuner.decisions()) {
      if (d.trial == id) trial["rungs"].push_back({{"bracket", d.bracket}, {"rung", d.rung}, {"promoted", d.promoted}});
    }
    all.push_back(trial);
  }
  return all.dump(1) + "\n";
}

std::string metricsCsv(const Tuner& tuner) {
  std::string csv = "trial,epoch,train_loss,heldout_loss,heldout_accuracy,lr,diverged\n";
  for (const auto& [id, t] : tuner.trials()) {
    for (const auto& r : t.rows) {
      csv += fmt::format("{},{},{:.9g},{:.9g},{:.9g},{:.9g},{}\n", id, r.epoch, r.train_loss, r.heldout_loss,
                         r.heldout_accuracy, r.lr, r.diverged ? 1 : 0);
    }
  }
  return csv;
}

std::string rungsCsv(const Tuner& tuner) {
  std::string csv = "bracket,rung,trial,metric,decision\n";
  for (const auto& d : tuner.decisions()) {
    csv +=
        fmt::format("{},{},{},{:.9g},{}\n", d.bracket, d.rung, d.trial, d.metric, d.promoted ? "promoted" : "stopped");
  }
  return csv;
}

std::string arraysCsv(const Tuner& tuner) {
  std::string csv = "array,group,bracket,rung,from_epochs,to_epochs,size,trials,seconds,from_journal,worker\n";
  for (const auto& a : tuner.arrays()) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{:.3f},{},{}\n", a.id, a.group, a.bracket, a.rung, a.from_epochs,
                       a.to_epochs, a.trials.size(), fmt::join(a.trials, " "), a.seconds, a.replayed ? 1 : 0, a.worker);
  }
  return csv;
}

}  // namespace

std::string curvesSvg(const Tuner& tuner) {
  constexpr double kWidth = 820, kHeight = 480, kLeft = 70, kRight = 160, kTop = 40, kBottom = 50;
  const bool by_loss = tuner.rankBy() == train::RankBy::HeldOutLoss;
  // Losses span decades (a trial that diverges next to ones near zero): a
  // log scale; accuracy a linear one. Epochs on a log scale too, so that
  // Hyperband's rungs (1, 3, 9, 27) stand evenly apart.
  auto value = [&](const train::MemberEpoch& r) {
    const double v = by_loss ? r.heldout_loss : r.heldout_accuracy;
    return by_loss ? (v > 0 ? std::log10(v) : NAN) : v;
  };
  double lo = INFINITY, hi = -INFINITY;
  int64_t epochs = 1;
  for (const auto& [id, t] : tuner.trials()) {
    for (const auto& r : t.rows) {
      if (!std::isfinite(value(r))) continue;
      lo = std::min(lo, value(r));
      hi = std::max(hi, value(r));
      epochs = std::max(epochs, r.epoch);
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-12) hi = lo + 1;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double epoch) {
    return epochs == 1 ? kLeft + plot_w / 2 : kLeft + plot_w * std::log(epoch) / std::log(static_cast<double>(epochs));
  };
  auto y = [&](double v) { return kTop + plot_h * (1 - (v - lo) / (hi - lo)); };
  auto label = [&](double v) { return by_loss ? std::pow(10.0, v) : v; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\">held-out {} of every trial (dashed: the rungs)</text>\n",
      kWidth, kHeight, kLeft, by_loss ? "loss (log scale)" : "accuracy");
  std::set<int64_t> rungs;
  for (const auto& a : tuner.arrays()) rungs.insert(a.to_epochs);
  for (int64_t r : rungs) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>\n",
        x(static_cast<double>(r)), kTop, kTop + plot_h);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x(static_cast<double>(r)),
                       kTop + plot_h + 16, r);
  }
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4;
    svg +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n", kLeft - 6, y(v) + 4, label(v));
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">epoch (log scale)</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 12);
  const auto ranked = tuner.ranked();
  const int64_t best = ranked.empty() ? -1 : ranked[0]->id;
  for (const auto& [id, t] : tuner.trials()) {
    if (t.rows.empty()) continue;
    std::string points;
    for (const auto& r : t.rows) {
      if (std::isfinite(value(r)))
        points += fmt::format("{:.1f},{:.1f} ", x(static_cast<double>(r.epoch)), y(value(r)));
    }
    const char* colour = id == best ? "#d62728" : t.status == "finished" ? "#1f77b4" : "#999";
    svg += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"><title>trial {}: "
        "{}</title></polyline>\n",
        points, colour, id == best ? 2.5 : 1, id, t.status);
    // A trial stopped after one epoch is a point, not a line: a dot.
    const auto& first = t.rows.front();
    if (t.rows.size() == 1 && std::isfinite(value(first))) {
      svg += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>trial {}: {}</title></circle>\n",
          x(static_cast<double>(first.epoch)), y(value(first)), colour, id, t.status);
    }
  }
  const double lx = kLeft + plot_w + 12;
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" fill=\"#d62728\">best: trial {2}</text>\n"
      "<text x=\"{0}\" y=\"{3}\" fill=\"#1f77b4\">trained to the end</text>\n"
      "<text x=\"{0}\" y=\"{4}\" fill=\"#999\">stopped at a rung</text>\n</svg>\n",
      lx, kTop + 12, best, kTop + 30, kTop + 48);
  return svg;
}

std::string tuneLeaderboard(const Tuner& tuner, size_t top) {
  std::string table = fmt::format("{:>4}  {:>5}  {:>6}  {:>12}  {:>9}  {}\n", "rank", "trial", "epochs",
                                  "held-out loss", "accuracy", "settings");
  const auto ranked = tuner.ranked();
  for (size_t k = 0; k < std::min(top, ranked.size()); ++k) {
    const auto& t = *ranked[k];
    std::vector<std::string> settings;
    for (const auto& [name, v] : t.settings) settings.push_back(name + "=" + settingText(v));
    const auto& last = t.rows.back();
    table += fmt::format("{:>4}  {:>5}  {:>6}  {:>12.4f}  {:>8.1f}%  {}\n", k + 1, t.id, t.epochs, last.heldout_loss,
                         100 * last.heldout_accuracy, fmt::join(settings, " "));
  }
  return table;
}

void writeTuneReport(const std::string& dir, const Tuner& tuner) {
  try {
    AtomicFiles files;
    auto add = [&](const char* name, const std::string& text) {
      files.add(dir + "/" + name, [&](std::ostream& out) { out << text; });
    };
    add("trials.csv", trialsCsv(tuner));
    add("trials.json", trialsJson(tuner));
    add("metrics.csv", metricsCsv(tuner));
    add("rungs.csv", rungsCsv(tuner));
    add("arrays.csv", arraysCsv(tuner));
    add("curves.svg", curvesSvg(tuner));
    files.commit();
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
}

}  // namespace hfta::tune
