#pragma once
// Choosing among the forms a fused op can run in by measuring them, on the
// machine that runs them, for the exact shapes, dtype and device (as
// cuDNN's benchmark mode does): the first call with a new key times every
// candidate and keeps the fastest; later calls, and later processes through
// a cache on disk, take the choice at once.
//
//   size_t form = autotune::choose(key, heuristic, {runGrouped, runPerMember});
//
// On CUDA the candidates run with cuDNN's algorithm choice as the caller
// has set it (hfta-train turns on its benchmark mode: the warm-up run is
// where cuDNN benchmarks, the timed runs use its pick).
//
// HFTA_AUTOTUNE=0 turns measurement off: every op takes its documented
// heuristic. A choice never changes a result beyond float rounding: the
// candidates compute the same function.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace hfta::autotune {

// Whether forms are measured (HFTA_AUTOTUNE unset or not "0") or taken from
// the heuristics.
bool enabled();
void setEnabled(bool on);

// The index of the fastest candidate for `key` (which names the op and
// everything its speed depends on; the processor or GPU model is added
// here): each candidate runs once to warm up, then 3 rounds time each
// candidate once in turn (a burst of another process's work slows the
// candidates it overlaps alike), and the median counts; a candidate faster
// than 2 ms runs as often as 2 ms take in each of its samples, which count
// the mean. A sample 3x slower than its round's fastest ends its
// candidate's turn. `heuristic` when measurement is off. A candidate that
// throws is never chosen (all throwing: `heuristic`).
size_t choose(const std::string& key, size_t heuristic, const std::vector<std::function<void()>>& candidates);

// An op's choices by the numbers that decide them (its shapes, flags,
// dtype, device), so that its hot path finds a form without formatting a
// key or building candidates: those happen once per signature, on the
// first call, inside choose(). Emptied when the choices are (forget(),
// setCachePath(), setEnabled()).
class Memo {
 public:
  using Signature = c10::SmallVector<int64_t, 32>;
  size_t choose(const Signature& signature, size_t heuristic, const std::function<std::string()>& key,
                const std::function<std::vector<std::function<void()>>()>& candidates);

 private:
  struct Hash {
    size_t operator()(const Signature& s) const;
  };
  std::mutex mutex_;
  uint64_t generation_ = 0;
  std::unordered_map<Signature, size_t, Hash> chosen_;
};

// Appends what a signature needs of a tensor: its sizes (and their count),
// dtype and device.
void appendTensor(Memo::Signature& signature, const at::Tensor& t);

// Each candidate's median seconds a run, timed as choose() times them (a
// warm-up each, then 3 rounds that take a sample of each candidate in turn,
// one run or the mean of as many as 2 ms take): -1 for one that throws,
// and the sample that ended the turn of one 3x slower than its round's
// fastest. How a segment plan's race compares its mixes of plans, with a
// warm-up of up to `warm_up_runs` runs, until a run maps almost no new
// memory (hfta::runUntilSettled); choose() warms up with one run.
std::vector<double> interleavedMedians(const std::vector<std::function<void()>>& candidates, int warm_up_runs = 1);

// Whether a fused op called now is differentiated (GradMode on, not in
// inference mode): its forms are then timed forward and backward, and the
// key says which.
bool recordsGradients();

// A candidate that runs a fused op's form as training runs it: `form` on
// detached copies of `tensors` (undefined ones stay undefined) and, when
// `backward`, the backward of its output's sum with every floating copy
// requiring grad; then it waits for the device.
using Form = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
std::function<void()> candidate(const std::vector<at::Tensor>& tensors, bool backward, Form form);

// The cache file: forms.json in hfta's cache folder (cacheFile(),
// support/measurement_cache.h); "" keeps choices in memory only.
std::string cachePath();
void setCachePath(const std::string& path);
// Forgets the choices held in memory (the file stays).
void forget();

// What the machine is, for keys: the processor's model name, or the GPU's.
std::string machine(const c10::Device& device);

}  // namespace hfta::autotune
