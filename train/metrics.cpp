#include "train/metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "runtime/atomic_file.h"
#include "train/setting_error.h"

namespace hfta::train {

std::string metricsCsv(const std::vector<MemberEpoch>& rows) {
  std::string out = "epoch,member,train_loss,heldout_loss,heldout_accuracy,heldout_perplexity,lr,seconds,diverged\n";
  for (const auto& r : rows) {
    out +=
        fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.3f},{}\n", r.epoch, r.member, r.train_loss,
                    r.heldout_loss, r.heldout_accuracy, std::exp(r.heldout_loss), r.lr, r.seconds, r.diverged ? 1 : 0);
  }
  return out;
}

std::string metricsJson(const std::vector<MemberEpoch>& rows) {
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
                   {"diverged", r.diverged}});
  }
  return out.dump(2) + "\n";
}

void writeMetrics(const std::string& dir, const std::vector<MemberEpoch>& rows) {
  try {
    AtomicFiles files;
    const auto csv = metricsCsv(rows), json = metricsJson(rows);
    files.add(dir + "/metrics.csv", [&](std::ostream& out) { out << csv; });
    files.add(dir + "/metrics.json", [&](std::ostream& out) { out << json; });
    files.commit();
  } catch (const FileWriteError& e) {
    throw UserError(fmt::format("{}; the metrics files in {} are as they were", e.what(), dir));
  }
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
