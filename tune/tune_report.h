#pragma once
// What a tuning run leaves in its folder, rewritten after every array (each
// file whole or not at all):
//   trials.csv / trials.json  every trial's settings, group, status, epochs
//                             and metrics (the JSON with every epoch's)
//   metrics.csv               per trial and epoch
//   rungs.csv                 each rung's verdict on each trial
//   arrays.csv                each fused array: its trials, epochs, time
//   curves.svg                each trial's held-out curve, the rungs' epochs
#include <string>

namespace hfta::tune {

class Tuner;

void writeTuneReport(const std::string& dir, const Tuner& tuner);
// The best `top` trials as a table.
std::string tuneLeaderboard(const Tuner& tuner, size_t top);
// Each trial's held-out metric over the epochs as an SVG chart.
std::string curvesSvg(const Tuner& tuner);

}  // namespace hfta::tune
