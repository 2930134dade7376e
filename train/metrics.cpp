#include "train/metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "support/atomic_file.h"
#include "train/setting_error.h"

namespace hfta::train {

std::string metricsCsv(const std::vector<MemberEpoch>& rows, const std::string& amp) {
  std::string out =
      "epoch,member,train_loss,heldout_loss,heldout_accuracy,heldout_perplexity,lr,seconds,diverged,train_seconds,"
      "amp,skipped_steps,loss_scale\n";
  for (const auto& r : rows) {
    out += fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.3f},{},{:.3f},{},{},{:.6g}\n", r.epoch, r.member,
                       r.train_loss, r.heldout_loss, r.heldout_accuracy, std::exp(r.heldout_loss), r.lr, r.seconds,
                       r.diverged ? 1 : 0, r.train_seconds, amp, r.skipped_steps, r.loss_scale);
  }
  return out;
}

std::string metricsJson(const std::vector<MemberEpoch>& rows, const std::string& amp) {
  auto out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"epoch", r.epoch},
                   {"member", r.member},
                   {"train_loss", r.train_loss},
                   {"heldout_loss", r.heldout_loss},
                   {"heldout_accuracy", r.heldout_accuracy},
                   {"heldout_perplexity", std::exp(r.heldout_loss)},
                   {"lr", r.lr},
                   {"seconds", r.seconds},
                   {"diverged", r.diverged},
                   {"train_seconds", r.train_seconds},
                   {"amp", amp},
                   {"skipped_steps", r.skipped_steps},
                   {"loss_scale", r.loss_scale}});
  }
  return out.dump(2) + "\n";
}

namespace {

// `files` (path, contents) all or none; UserError saying which stayed as they were.
void writeAll(const std::vector<std::pair<std::string, std::string>>& files, const std::string& what) {
  try {
    AtomicFiles group;
    for (const auto& [path, contents] : files) {
      group.add(path, [&contents = contents](std::ostream& out) { out << contents; });
    }
    group.commit();
  } catch (const FileWriteError& e) {
    throw UserError(fmt::format("{}; the {} files are as they were", e.what(), what));
  }
}

}  // namespace

void writeMetrics(const std::string& dir, const std::vector<MemberEpoch>& rows, const std::string& amp) {
  writeAll({{dir + "/metrics.csv", metricsCsv(rows, amp)}, {dir + "/metrics.json", metricsJson(rows, amp)}}, "metrics");
}

void writeEvaluation(const std::string& dir, const std::vector<MemberEvaluation>& evaluations,
                     const std::string& data) {
  std::string csv = "member,top1,top5,loss,data\n";
  auto json = nlohmann::json::array();
  for (const auto& e : evaluations) {
    csv += fmt::format("{},{:.6g},{:.6g},{:.6g},{}\n", e.member, e.top1, e.top5, e.loss, data);
    json.push_back({{"member", e.member}, {"top1", e.top1}, {"top5", e.top5}, {"loss", e.loss}, {"data", data}});
  }
  writeAll({{dir + "/eval.csv", csv}, {dir + "/eval.json", json.dump(2) + "\n"}}, "evaluation");
}

std::string evaluationTable(const std::vector<MemberEvaluation>& evaluations) {
  std::string out = fmt::format("{:>6}  {:>7}  {:>7}  {:>8}\n", "member", "top-1", "top-5", "loss");
  for (const auto& e : evaluations) {
    out += fmt::format("{:>6}  {:>6.2f}%  {:>6.2f}%  {:>8.4f}\n", e.member, 100 * e.top1, 100 * e.top5, e.loss);
  }
  return out;
}

RankBy rankByName(const std::string& name) {
  if (name == "accuracy") return RankBy::HeldOutAccuracy;
  if (name == "loss") return RankBy::HeldOutLoss;
  throw SettingError("metric", fmt::format("is accuracy or loss, not {}", name));
}

std::vector<MemberEpoch> rankMembers(const std::vector<MemberEpoch>& rows, int64_t members, RankBy by) {
  if (static_cast<int64_t>(rows.size()) < members) return {};
  std::vector<MemberEpoch> last(rows.end() - members, rows.end());
  std::stable_sort(last.begin(), last.end(), [&](const MemberEpoch& a, const MemberEpoch& b) {
    if (a.diverged != b.diverged) return !a.diverged;
    if (by == RankBy::HeldOutAccuracy && a.heldout_accuracy != b.heldout_accuracy) {
      return a.heldout_accuracy > b.heldout_accuracy;
    }
    return a.heldout_loss < b.heldout_loss;
  });
  return last;
}

std::string leaderboard(const std::vector<MemberEpoch>& ranked) {
  std::string out = fmt::format("{:>4}  {:>6}  {:>10}  {:>12}  {:>12}  {}\n", "rank", "member", "lr", "held-out acc",
                                "held-out loss", "status");
  for (size_t i = 0; i < ranked.size(); ++i) {
    const auto& r = ranked[i];
    out += fmt::format("{:>4}  {:>6}  {:>10.4g}  {:>11.2f}%  {:>12.4f}  {}\n", i + 1, r.member, r.lr,
                       100 * r.heldout_accuracy, r.heldout_loss, r.diverged ? "diverged (frozen)" : "ok");
  }
  return out;
}

}  // namespace hfta::train
