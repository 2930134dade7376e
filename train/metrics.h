#pragma once
// A run's per-epoch, per-member metrics as files (metrics.csv and
// metrics.json, written together or not at all) and the ranking of the
// members at the end.
#include <string>
#include <vector>

#include "train/trainer.h"

namespace hfta::train {

// `amp`: the run's mixed precision ("none", "bfloat16", "float16"), a
// column of every row.
std::string metricsCsv(const std::vector<MemberEpoch>& rows, const std::string& amp);
std::string metricsJson(const std::vector<MemberEpoch>& rows, const std::string& amp);

// DIR/metrics.csv and DIR/metrics.json, both or neither (UserError naming
// the file that could not be written; the old files then stay as they were).
void writeMetrics(const std::string& dir, const std::vector<MemberEpoch>& rows, const std::string& amp);

// --eval's results: DIR/eval.csv and DIR/eval.json (member, top1, top5,
// loss, and the data evaluated on), both or neither; and as a table.
void writeEvaluation(const std::string& dir, const std::vector<MemberEvaluation>& evaluations, const std::string& data);
std::string evaluationTable(const std::vector<MemberEvaluation>& evaluations);

enum class RankBy { HeldOutAccuracy, HeldOutLoss };
// "accuracy" or "loss"; SettingError("metric") otherwise.
RankBy rankByName(const std::string& name);

// The last epoch's rows of `members` members, best first (ties in accuracy
// broken by the held-out loss); diverged members last.
std::vector<MemberEpoch> rankMembers(const std::vector<MemberEpoch>& rows, int64_t members, RankBy by);

// The ranking as a table: rank, member, lr, held-out accuracy and loss, status.
std::string leaderboard(const std::vector<MemberEpoch>& ranked);

}  // namespace hfta::train
