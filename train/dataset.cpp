#include "train/dataset.h"

#include <fmt/format.h>
#include <torch/data/datasets/mnist.h>
#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "support/error_summary.h"
#include "support/user_error.h"
#include "train/setting_error.h"
#include "train/text_data.h"

namespace hfta::train {
namespace fs = std::filesystem;

namespace {

void requireFile(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw SettingError(
        "data", fmt::format("{}: {} is missing. Give the folder that holds the data set's files", what, path.string()));
  }
}

// Checks labels and returns the number of classes they imply.
void checkLabels(const Dataset& d, const std::string& source) {
  if (d.targets.numel() == 0) throw UserError(fmt::format("{}: no samples", source));
  const int64_t lo = d.targets.min().item<int64_t>(), hi = d.targets.max().item<int64_t>();
  if (lo < 0 || hi >= d.classes) {
    throw UserError(fmt::format("{}: label {} is out of range [0, {})", source, lo < 0 ? lo : hi, d.classes));
  }
}

}  // namespace

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  return {inputs.slice(0, begin, end), targets.slice(0, begin, end), classes, name};
}

Dataset Dataset::select(const at::Tensor& index) const {
  return {inputs.index_select(0, index), targets.index_select(0, index), classes, name};
}

Dataset loadDigits(const std::string& path) {
  requireFile(path, "digits");
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error&) {
    throw UserError(
        fmt::format("digits: {} is not a torch.save'd {{images, labels}} file "
                    "(scripts/make_digits.py writes one)",
                    path));
  }
  if (!value.isGenericDict()) throw UserError(fmt::format("digits: {} holds no {{images, labels}} dict", path));
  const auto dict = value.toGenericDict();
  if (!dict.contains("images") || !dict.contains("labels")) {
    throw UserError(fmt::format("digits: {} has no \"images\" or \"labels\"", path));
  }
  Dataset d{dict.at("images").toTensor().to(at::kFloat), dict.at("labels").toTensor().to(at::kLong), 10, "digits"};
  if (d.inputs.dim() != 4 || d.targets.dim() != 1 || d.inputs.size(0) != d.targets.size(0)) {
    throw UserError(fmt::format("digits: {} must hold images [N, C, H, W] and labels [N]", path));
  }
  checkLabels(d, path);
  return d;
}

namespace {

// MNIST's training (60000) or test (10000, t10k-*) idx files in `dir`.
Dataset readMnist(const std::string& dir, bool test) {
  // LibTorch's reader checks the headers but not that the data is all
  // there (a short file reads as zeros): the sizes are checked here.
  const int64_t samples = test ? 10000 : 60000, pixels = 28 * 28;
  const std::string prefix = test ? "t10k" : "train", split = test ? "test" : "training";
  for (const auto& [name, what, size] : {std::tuple{prefix + "-images-idx3-ubyte", "images", 16 + samples * pixels},
                                         std::tuple{prefix + "-labels-idx1-ubyte", "labels", 8 + samples}}) {
    const auto path = fs::path(dir) / name;
    requireFile(path, "mnist");
    std::error_code ec;
    const auto actual = fs::file_size(path, ec);
    if (ec || actual != static_cast<uintmax_t>(size)) {
      throw UserError(fmt::format("mnist: {} has {} bytes, MNIST's {} {} have {} (a truncated or damaged download?)",
                                  path.string(), actual, split, what, size));
    }
  }
  try {
    using torch::data::datasets::MNIST;
    MNIST mnist(dir, test ? MNIST::Mode::kTest : MNIST::Mode::kTrain);
    // LibTorch's reader normalizes to [0, 1].
    Dataset d{mnist.images().to(at::kFloat), mnist.targets().to(at::kLong), 10, test ? "mnist test" : "mnist"};
    checkLabels(d, dir);
    return d;
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("mnist: {} does not hold MNIST's idx files: {}", dir, errorSummary(e)));
  }
}

// CIFAR-10's binary batches (10000 records of a label byte and 3x32x32 pixel bytes each).
Dataset readCifar10(const std::vector<fs::path>& batches, const std::string& name, const std::string& dir) {
  constexpr int64_t kRecord = 1 + 3 * 32 * 32, kPerBatch = 10000;
  std::vector<at::Tensor> images, labels;
  for (const auto& path : batches) {
    requireFile(path, "cifar10");
    if (fs::file_size(path) != static_cast<uintmax_t>(kRecord * kPerBatch)) {
      throw UserError(fmt::format("cifar10: {} has {} bytes, a CIFAR-10 binary batch has {}", path.string(),
                                  fs::file_size(path), kRecord * kPerBatch));
    }
    auto raw = at::empty({kPerBatch, kRecord}, at::kByte);
    std::ifstream in(path, std::ios::binary);
    in.read(static_cast<char*>(raw.data_ptr()), kRecord * kPerBatch);
    labels.push_back(raw.select(1, 0).to(at::kLong));
    images.push_back(raw.slice(1, 1).reshape({kPerBatch, 3, 32, 32}).to(at::kFloat).div_(255));
  }
  Dataset d{at::cat(images), at::cat(labels), 10, name};
  checkLabels(d, dir);
  return d;
}

}  // namespace

Dataset loadMnist(const std::string& dir) { return readMnist(dir, /*test=*/false); }

Dataset loadCifar10(const std::string& dir) {
  std::vector<fs::path> batches;
  for (int batch = 1; batch <= 5; ++batch) batches.push_back(fs::path(dir) / fmt::format("data_batch_{}.bin", batch));
  return readCifar10(batches, "cifar10", dir);
}

std::optional<Dataset> loadTestSet(const std::string& kind, const std::string& path) {
  std::error_code ec;
  if (kind == "cifar10" && fs::exists(fs::path(path) / "test_batch.bin", ec)) {
    return readCifar10({fs::path(path) / "test_batch.bin"}, "cifar10 test", path);
  }
  if (kind == "mnist" && fs::exists(fs::path(path) / "t10k-images-idx3-ubyte", ec)) return readMnist(path, true);
  return std::nullopt;
}

Dataset synthetic(int64_t size, const std::vector<int64_t>& shape, int64_t classes, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> full{size};
  full.insert(full.end(), shape.begin(), shape.end());
  auto images = at::rand(full, gen);
  const auto teacher = at::randn({images[0].numel(), classes}, gen);
  auto labels = images.flatten(1).sub(0.5).matmul(teacher).argmax(1);
  return {images, labels, classes, "synthetic"};
}

Dataset loadDataset(const std::string& kind, const std::string& path, int64_t sequence_length, uint64_t seed) {
  if (kind == "digits") return loadDigits(path);
  if (kind == "mnist") return loadMnist(path);
  if (kind == "cifar10") return loadCifar10(path);
  if (kind == "synthetic") return synthetic(2048, {1, 8, 8}, 10, 0);
  if (kind == "wikitext") return languageModelData(path, sequence_length);
  if (kind == "wikitext-mlm") return maskedLanguageModelData(path, sequence_length, seed);
  throw UserError(
      fmt::format("unknown data set {}: use digits, mnist, cifar10, synthetic, wikitext or wikitext-mlm", kind));
}

std::pair<Dataset, Dataset> holdOut(const Dataset& data, double fraction, uint64_t seed) {
  if (!(fraction > 0 && fraction < 1))
    throw SettingError("holdout", fmt::format("must be in (0, 1), got {}", fraction));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto order = at::randperm(data.size(), gen);
  const int64_t held = std::max<int64_t>(1, static_cast<int64_t>(data.size() * fraction));
  return {data.select(order.slice(0, 0, data.size() - held)), data.select(order.slice(0, data.size() - held))};
}

}  // namespace hfta::train
