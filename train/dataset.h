#pragma once
// The data sets hfta-train reads: inputs [N, ...] with targets [N] (images
// [N, C, H, W] scaled to [0, 1], with labels in [0, classes)) or targets
// [N, L] per position (token ids [N, L], int64; text_data.h), where
// kIgnoreIndex marks a position without a target. Every loader throws
// hfta::UserError naming the file and what is wrong with it.
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

namespace hfta::train {

struct Dataset {
  at::Tensor inputs;    // [N, C, H, W] float32 images, or [N, L] int64 token ids
  at::Tensor targets;   // [N] or [N, L], int64
  int64_t classes = 0;  // classes, or the vocabulary's size
  std::string name;
  // The data set's own held-out split (WikiText's validation file), if it
  // has one; else hfta-train holds out a fraction of the samples.
  std::shared_ptr<const Dataset> heldout;

  int64_t size() const { return inputs.size(0); }
  // Rows [begin, end) or the rows at `index`.
  Dataset slice(int64_t begin, int64_t end) const;
  Dataset select(const at::Tensor& index) const;
};

// The 8x8 handwritten digits scikit-learn ships (1797 images, 10 classes),
// converted at setup time into a torch.save'd {"images", "labels"} file.
Dataset loadDigits(const std::string& path);
// MNIST's idx files in `dir` (train-images-idx3-ubyte, train-labels-idx1-ubyte;
// read with LibTorch's reader).
Dataset loadMnist(const std::string& dir);
// CIFAR-10's binary batches in `dir` (data_batch_1.bin ... data_batch_5.bin).
Dataset loadCifar10(const std::string& dir);
// The data set's own test split, when its folder has one: CIFAR-10's
// test_batch.bin, MNIST's t10k-* files.
std::optional<Dataset> loadTestSet(const std::string& kind, const std::string& path);
// Random images of `shape` with labels from a fixed random linear teacher,
// so that there is something to learn (for benchmarks and tests).
Dataset synthetic(int64_t size, const std::vector<int64_t>& shape, int64_t classes, uint64_t seed);

// By name: "digits" (`path` is the .pt file), "mnist", "cifar10" (`path` is
// the folder), "synthetic", or the text of a folder in WikiText-2's format:
// "wikitext" (next-word prediction) or "wikitext-mlm" (masked words, masks
// drawn from `seed`), in sequences of `sequence_length` tokens.
Dataset loadDataset(const std::string& kind, const std::string& path, int64_t sequence_length = 35, uint64_t seed = 0);

// The last `fraction` of a fixed permutation (seeded) is held out.
std::pair<Dataset, Dataset> holdOut(const Dataset& data, double fraction, uint64_t seed);

}  // namespace hfta::train
