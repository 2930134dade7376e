#include "run/run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hfta/hfta.h"
#include "io/tensor_slots.h"
#include "run/fresh_members.h"
#include "run/gather.h"
#include "support/atomic_file.h"
#include "train/optimizers.h"
#include "train/setting_error.h"

namespace hfta::train {
namespace {

// Parameter and buffer names with one member's shapes: what a checkpoint
// of a run and the model given to resume it must agree on.
std::map<std::string, std::vector<int64_t>> memberShapes(const torch::jit::Module& module) {
  const bool fused = isFused(module);
  std::map<std::string, std::vector<int64_t>> shapes;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    auto sizes = t.sizes().vec();
    if (fused && !sizes.empty()) sizes.erase(sizes.begin());
    shapes[name] = sizes;
  };
  for (const auto& p : module.named_parameters()) add(p.name, p.value);
  for (const auto& b : module.named_buffers()) add(b.name, b.value);
  return shapes;
}

void checkSameModel(const std::string& model, const std::string& checkpoint, const torch::jit::Module& saved) {
  const auto given = memberShapes(loadMembers({model})[0].module), expected = memberShapes(saved);
  for (const auto& [name, shape] : expected) {
    const auto it = given.find(name);
    if (it == given.end() || it->second != shape) {
      throw SettingError(
          "resume",
          fmt::format(
              "the checkpoint {} is of another model than {}: its `{}` is [{}], {}. Resume with the model it was "
              "saved from",
              checkpoint, model, name, fmt::join(shape, ", "),
              it == given.end() ? "which the model does not have"
                                : fmt::format("the model's is [{}]", fmt::join(it->second, ", "))));
    }
  }
  if (given.size() != expected.size()) {
    throw SettingError("resume", fmt::format("the checkpoint {} is of another model than {}: it has {} "
                                             "parameters and buffers, the model {}. Resume with the model it "
                                             "was saved from",
                                             checkpoint, model, expected.size(), given.size()));
  }
}

// The fused array the config asks for, before training.
torch::jit::Module arrayOf(const RunConfig& config) {
  auto model = loadMembers({config.model})[0].module;
  if (isFused(model)) {
    if (config.array_size > 0 && config.array_size != arraySize(model)) {
      throw SettingError("array_size", fmt::format("{} does not match the {} members of {}", config.array_size,
                                                   arraySize(model), config.model));
    }
    return model;
  }
  if (config.array_size < 1) {
    throw SettingError(
        "array_size",
        fmt::format(
            "{} is a plain model, not one made by hfta-fuse: give the number of fresh members to train (and their "
            "seeds), or fuse B models first",
            config.model));
  }
  std::vector<uint64_t> seeds = config.seeds;
  if (seeds.empty()) {
    for (int64_t b = 0; b < config.array_size; ++b) seeds.push_back(static_cast<uint64_t>(b));
  } else if (static_cast<int64_t>(seeds.size()) != config.array_size) {
    throw SettingError("seeds",
                       fmt::format("has {} values but the array has {} members", seeds.size(), config.array_size));
  }
  return freshArray(model, seeds, config.model);
}

}  // namespace

at::ScalarType dtypeByName(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "float64") return at::kDouble;
  throw SettingError("dtype", fmt::format("is float32 or float64, not {}", name));
}

at::ScalarType ampDtypeByName(const std::string& name) {
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  throw SettingError("amp_dtype", fmt::format("is bfloat16 or float16, not {}", name));
}

std::optional<at::ScalarType> ampSetting(bool amp, const std::string& amp_dtype, c10::Device device) {
  if (!amp_dtype.empty() && !amp) throw SettingError("amp_dtype", "needs --amp");
  if (!amp) return std::nullopt;
  return ampDtypeByName(!amp_dtype.empty() ? amp_dtype : device.is_cuda() ? "float16" : "bfloat16");
}

c10::Device deviceByName(const std::string& name) {
  std::optional<c10::Device> device;
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
    throw SettingError("device", fmt::format("is cpu, cuda or cuda:N, not {}", name));
  }
  if (device->is_cuda() && !at::hasCUDA()) {
    throw SettingError("device", fmt::format("{}: no CUDA device here (or this LibTorch has no CUDA)", name));
  }
  if (!device->is_cpu() && !device->is_cuda())
    throw SettingError("device", fmt::format("is cpu or cuda, not {}", name));
  return *device;
}

namespace {

std::string ampName(const TrainOptions& options) {
  if (!options.amp) return "none";
  return *options.amp == at::kHalf ? "float16" : "bfloat16";
}

}  // namespace

Run::Run(const RunConfig& config) : config_(config) {
  // A run's shapes repeat every batch: cuDNN's benchmark mode picks each
  // convolution's fastest algorithm once (the autotuner's forms are timed
  // with it, runtime/ops/autotune.h).
  if (config.options.device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);
  torch::jit::Module module;
  // What the run goes on from (a checkpoint's state), and where it came from.
  std::optional<c10::IValue> saved_state;
  std::string saved_where;
  if (!config.members.empty()) {
    if (!config.resume.empty()) throw SettingError("resume", "goes on from one checkpoint, not from members of many");
    auto gathered = gatherCheckpoints(config.members);
    module = gathered.module;
    saved_state = gathered.state;
    saved_where = "the members gathered from " + config.members[0].checkpoint;
  } else if (!config.resume.empty()) {
    saved_where = resolveCheckpoint(config.resume, &resume_note_);
    module = loadCheckpointModule(saved_where);
    if (!config.model.empty()) checkSameModel(config.model, saved_where, module);
    saved_state = readCheckpointState(saved_where);
  } else {
    module = arrayOf(config);
  }
  module.to(config.options.dtype);
  module.to(config.options.device);
  const int64_t members = hfta::arraySize(module);

  auto all = loadDataset(config.dataset, config.data, config.sequence_length, config.options.seed);
  if (config.limit < 0) throw SettingError("limit", "must be >= 0");
  const auto own_heldout = all.heldout;
  if (config.limit > 0 && config.limit < all.size()) all = all.slice(0, config.limit);
  if (own_heldout) {
    train_ = all;
    heldout_ = *own_heldout;
  } else {
    std::tie(train_, heldout_) = holdOut(all, config.holdout, config.options.seed);
  }
  if (config.eval) test_ = loadTestSet(config.dataset, config.data);
  if (test_ && config.limit > 0 && config.limit < test_->size()) test_ = test_->slice(0, config.limit);
  // Images take the module's dtype; token ids stay integers.
  for (auto* data : {&train_, &heldout_, test_ ? &*test_ : nullptr}) {
    if (data == nullptr) continue;
    if (data->inputs.is_floating_point()) data->inputs = data->inputs.to(config.options.dtype);
  }

  // A tied weight is one parameter, stepped once.
  optimizer_ = makeOptimizer(config.optimizer, distinctParameters(module), members, config.hyper);
  const int64_t batches_per_epoch =
      (train_.size() + config.options.batch_size - 1) / std::max<int64_t>(config.options.batch_size, 1);
  schedule_ =
      Schedule::make(config.scheduler, config.schedule_settings, *optimizer_, config.options.epochs, batches_per_epoch);
  trainer_ = std::make_unique<Trainer>(module, *optimizer_, config.options);
  trainer_->setSchedule(schedule_.get());
  if (saved_state) {
    auto resumed = restoreCheckpointState(*saved_state, saved_where, *optimizer_, schedule_.get(),
                                          {ampName(config.options), trainer_->scaler()});
    rows_ = std::move(resumed.rows);
    trainer_->restore(std::move(resumed.progress));
  }
}

std::vector<MemberEpoch> Run::nextEpoch(const Trainer::BetweenBatches& between) {
  auto epoch = trainer_->runEpoch(train_, heldout_, between);
  rows_.insert(rows_.end(), epoch.begin(), epoch.end());
  return epoch;
}

void Run::saveCheckpoint(const std::string& dir) const {
  train::saveCheckpoint(dir, trainer_->module(), *optimizer_, schedule_.get(),
                        {ampName(config_.options), trainer_->scaler()}, progress(), rows_);
}

std::vector<std::string> Run::exportMembers(const std::vector<int64_t>& members, const std::string& dir) const {
  std::vector<std::string> paths;
  try {
    AtomicFiles files;
    for (int64_t b : members) {
      paths.push_back(fmt::format("{}/member_{}.pt", dir, b));
      const auto member = split(trainer_->module(), b);
      files.add(paths.back(), [&](std::ostream& out) { member.save(out); });
    }
    files.commit();
  } catch (const FileWriteError& e) {
    throw UserError(e.what());
  }
  return paths;
}

}  // namespace hfta::train
