#include "runtime/optim/optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "support/atomic_file.h"

namespace hfta::optim {

void checkRange(const Hyper& hyper, const std::string& key, int64_t array_size, double lo, double hi, bool hi_open) {
  for (int64_t b = 0; b < array_size; ++b) {
    const double v = hyper.at(key).at(b);
    if (!(v >= lo && (hi_open ? v < hi : v <= hi))) {
      throw std::invalid_argument(
          fmt::format("{} of member {} is {}; it must be in [{}, {}{}", key, b, v, lo, hi, hi_open ? ")" : "]"));
    }
  }
}

FusedOptimizer::FusedOptimizer(std::string name, std::vector<at::Tensor> params, int64_t array_size, Hyper hyper)
    : name_(std::move(name)),
      params_(std::move(params)),
      array_size_(array_size),
      hyper_(std::move(hyper)),
      steps_(params_.size(), std::vector<int64_t>(std::max<int64_t>(array_size, 0), 0)),
      state_(params_.size()),
      frozen_(std::max<int64_t>(array_size, 0), 0) {
  if (array_size_ < 1) throw std::invalid_argument(name_ + ": the array size must be at least 1");
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (p.dim() < 1 || p.size(0) != array_size_) {
      throw std::invalid_argument(
          fmt::format("{}: parameter {} has shape [{}], not {} members stacked on dim 0; a parameter "
                      "that all members share cannot take per-member updates (keep it out of the optimizer)",
                      name_, i, fmt::join(p.sizes(), ", "), array_size_));
    }
    if (!p.is_contiguous()) {
      throw std::invalid_argument(fmt::format("{}: parameter {} is not contiguous", name_, i));
    }
  }
}

void FusedOptimizer::checkAll() const {
  for (const auto& [key, value] : hyper_) value.check(array_size_, name_ + " " + key);
  check(hyper_);
}

void FusedOptimizer::freeze(int64_t member) {
  if (member < 0 || member >= array_size_) {
    throw std::invalid_argument(fmt::format("{}: no member {} to freeze", name_, member));
  }
  frozen_[member] = 1;
}

const PerMember& FusedOptimizer::hyper(const std::string& key) const {
  auto it = hyper_.find(key);
  if (it == hyper_.end()) throw std::invalid_argument(fmt::format("{} has no hyper-parameter {}", name_, key));
  return it->second;
}

void FusedOptimizer::set_hyper(const std::string& key, PerMember value) {
  hyper(key);  // exists
  value.check(array_size_, name_ + " " + key);
  Hyper candidate = hyper_;
  candidate.at(key) = std::move(value);
  check(candidate);
  hyper_ = std::move(candidate);
}

void FusedOptimizer::set_scheduled_hyper(const std::string& key, PerMember value) {
  hyper(key);  // exists
  value.check(array_size_, name_ + " " + key);
  hyper_.at(key) = std::move(value);
}

std::vector<double> FusedOptimizer::values(const std::string& key) const { return hyper(key).expanded(array_size_); }

bool FusedOptimizer::anyNonZero(const std::string& key) const {
  for (double v : values(key)) {
    if (v != 0) return true;
  }
  return false;
}

at::Tensor& FusedOptimizer::state(size_t i, const std::string& key, const std::function<at::Tensor()>& init) {
  auto& slot = state_[i][key];
  if (!slot.defined()) slot = init().contiguous();
  return slot;
}

void FusedOptimizer::step(const std::vector<uint8_t>& skip) {
  if (!skip.empty() && static_cast<int64_t>(skip.size()) != array_size_) {
    throw std::invalid_argument(fmt::format("{}: {} skip flags for {} members", name_, skip.size(), array_size_));
  }
  at::NoGradGuard no_grad;
  idle_ = frozen_;
  for (size_t b = 0; b < skip.size(); ++b) idle_[b] |= skip[b];
  std::vector<size_t> ready;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    for (int64_t b = 0; b < array_size_; ++b) steps_[i][b] += idle_[b] ? 0 : 1;
    ready.push_back(i);
  }
  updateParameters(ready);
}

void FusedOptimizer::zero_grad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

c10::IValue FusedOptimizer::state_dict() const {
  c10::impl::GenericDict hyper(c10::StringType::get(), c10::ListType::ofFloats());
  for (const auto& [key, value] : hyper_) hyper.insert(key, c10::List<double>(value.expanded(array_size_)));
  c10::impl::GenericList state(c10::DictType::create(c10::StringType::get(), c10::TensorType::get()));
  for (const auto& tensors : state_) {
    c10::Dict<std::string, at::Tensor> d;
    for (const auto& [key, t] : tensors) d.insert(key, t.detach().clone().cpu());
    state.push_back(d);
  }
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("optimizer", name_);
  root.insert("array_size", array_size_);
  root.insert("hyper", hyper);
  c10::impl::GenericList steps(c10::ListType::ofInts());
  for (const auto& member_steps : steps_) steps.push_back(c10::List<int64_t>(member_steps));
  root.insert("steps", steps);
  root.insert("state", state);
  c10::List<bool> frozen;
  for (uint8_t f : frozen_) frozen.push_back(f != 0);
  root.insert("frozen", frozen);
  return root;
}

void FusedOptimizer::load_state_dict(const c10::IValue& value) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{}: cannot load this optimizer state: {}", name_, why));
  };
  if (!value.isGenericDict()) fail("it is not an optimizer state dict");
  const auto root = value.toGenericDict();
  for (const char* key : {"optimizer", "array_size", "hyper", "steps", "state"}) {
    if (!root.contains(key)) fail(fmt::format("it has no \"{}\"", key));
  }
  if (root.at("optimizer").toStringRef() != name_) {
    fail(fmt::format("it was saved by {}", root.at("optimizer").toStringRef()));
  }
  if (root.at("array_size").toInt() != array_size_) {
    fail(fmt::format("it is for {} members, this optimizer has {}", root.at("array_size").toInt(), array_size_));
  }
  // Per parameter B counts, or one count (saved before counts were per member).
  std::vector<std::vector<int64_t>> steps;
  for (const auto& entry : root.at("steps").toListRef()) {
    steps.push_back(entry.isInt() ? std::vector<int64_t>(array_size_, entry.toInt()) : entry.toIntVector());
    if (static_cast<int64_t>(steps.back().size()) != array_size_) fail("its step counts are for another array size");
  }
  const auto state = root.at("state").toList();
  if (steps.size() != params_.size() || state.size() != params_.size()) {
    fail(fmt::format("it is for {} parameters, this optimizer has {}", steps.size(), params_.size()));
  }
  Hyper hyper = hyper_;
  for (const auto& entry : root.at("hyper").toGenericDict()) {
    const auto& key = entry.key().toStringRef();
    if (!hyper.count(key)) fail(fmt::format("unknown hyper-parameter {}", key));
    hyper.at(key) = PerMember(entry.value().toDoubleVector());
    hyper.at(key).check(array_size_, name_ + " " + key);
  }
  check(hyper);
  std::vector<std::map<std::string, at::Tensor>> tensors(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const auto& entry : state.get(i).toGenericDict()) {
      const auto t = entry.value().toTensor();
      if (t.sizes() != params_[i].sizes()) {
        fail(fmt::format("state {} of parameter {} has shape [{}], the parameter [{}]", entry.key().toStringRef(), i,
                         fmt::join(t.sizes(), ", "), fmt::join(params_[i].sizes(), ", ")));
      }
      tensors[i][entry.key().toStringRef()] = t.to(params_[i].options()).contiguous();
    }
  }
  std::vector<uint8_t> frozen(array_size_, 0);
  if (root.contains("frozen")) {
    const auto saved = root.at("frozen").toBoolList();
    if (static_cast<int64_t>(saved.size()) != array_size_) fail("its frozen list is for another array size");
    for (int64_t b = 0; b < array_size_; ++b) frozen[b] = saved.get(b);
  }
  hyper_ = std::move(hyper);
  steps_ = steps;
  state_ = std::move(tensors);
  frozen_ = std::move(frozen);
}

c10::IValue FusedOptimizer::gather_state_dicts(const std::vector<MemberOfState>& picks) {
  if (picks.empty()) throw std::invalid_argument("no members to gather");
  const auto first = picks[0].state.toGenericDict();
  const auto params = first.at("state").toList().size();
  c10::impl::GenericDict hyper(c10::StringType::get(), c10::ListType::ofFloats());
  for (const auto& entry : first.at("hyper").toGenericDict()) {
    const auto& key = entry.key().toStringRef();
    std::vector<MemberOfState> lists;
    for (const auto& pick : picks) lists.push_back({pick.state.toGenericDict().at("hyper"), pick.member});
    hyper.insert(key, gatherListEntry(lists, key));
  }
  c10::impl::GenericList steps(c10::ListType::ofInts());
  c10::impl::GenericList state(c10::DictType::create(c10::StringType::get(), c10::TensorType::get()));
  for (size_t i = 0; i < params; ++i) {
    c10::List<int64_t> counts;
    std::map<std::string, std::vector<at::Tensor>> slices;
    std::vector<at::Tensor> like;  // per pick: one of its state slices, for a missing key's zeros
    for (const auto& pick : picks) {
      const auto dict = pick.state.toGenericDict();
      if (dict.at("optimizer") != first.at("optimizer") || dict.at("state").toList().size() != params) {
        throw std::invalid_argument("members of different optimizers or models cannot share an optimizer");
      }
      const auto entry = dict.at("steps").toList().get(i);
      counts.push_back(entry.isInt() ? entry.toInt() : entry.toIntVector().at(pick.member));
      for (const auto& s : dict.at("state").toList().get(i).toGenericDict()) {
        slices[s.key().toStringRef()].resize(picks.size());
      }
    }
    c10::Dict<std::string, at::Tensor> tensors;
    for (auto& [key, members] : slices) {
      at::Tensor template_slice;
      for (size_t b = 0; b < picks.size(); ++b) {
        const auto dict = picks[b].state.toGenericDict().at("state").toList().get(i).toGenericDict();
        if (dict.contains(key)) members[b] = dict.at(key).toTensor()[picks[b].member].unsqueeze(0);
        if (members[b].defined()) template_slice = members[b];
      }
      for (auto& m : members) {
        if (!m.defined()) m = at::zeros_like(template_slice);
      }
      tensors.insert(key, at::cat(members));
    }
    steps.push_back(counts);
    state.push_back(tensors);
  }
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("optimizer", first.at("optimizer"));
  root.insert("array_size", static_cast<int64_t>(picks.size()));
  root.insert("hyper", hyper);
  root.insert("steps", steps);
  root.insert("state", state);
  root.insert("frozen", gatherListEntry(picks, "frozen"));
  return root;
}

void FusedOptimizer::save(const std::string& path) const {
  const auto bytes = torch::pickle_save(state_dict());
  writeAtomically(path,
                  [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void FusedOptimizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read optimizer state {}", name_, path));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error&) {
    throw std::invalid_argument(fmt::format("{}: {} is not a saved optimizer state", name_, path));
  }
  load_state_dict(value);
}

}  // namespace hfta::optim
