#include "train/text_data.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "support/user_error.h"
#include "train/setting_error.h"

namespace hfta::train {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kPad = 0, kMask = 1, kUnknown = 2;
// BERT's masking (Devlin et al. 2019, 3.1): 15% of the positions, of which
// 80% read <mask>, 10% a random word and 10% the word itself.
constexpr double kMaskedFraction = 0.15, kReadMask = 0.8, kReadRandom = 0.1;

class Vocabulary {
 public:
  Vocabulary() {
    for (const char* special : {"<pad>", "<mask>", "<unk>"}) add(special);
  }
  int64_t add(const std::string& word) {
    auto [it, added] = index_.emplace(word, static_cast<int64_t>(index_.size()));
    return it->second;
  }
  int64_t find(const std::string& word) const {
    auto it = index_.find(word);
    return it == index_.end() ? kUnknown : it->second;
  }
  int64_t size() const { return static_cast<int64_t>(index_.size()); }

 private:
  std::unordered_map<std::string, int64_t> index_;
};

fs::path requireTokensFile(const std::string& dir, const char* name) {
  const auto path = fs::path(dir) / name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw SettingError("data", fmt::format("{} is missing: give a folder in WikiText-2's format (wiki.train.tokens, "
                                           "wiki.valid.tokens), such as the one scripts/make_corpus.py writes",
                                           path.string()));
  }
  return path;
}

// Each line's words then <eos>; with `grow`, new words join the vocabulary,
// else they read <unk>.
at::Tensor readTokens(const fs::path& path, Vocabulary& vocabulary, bool grow) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("cannot read {}", path.string()));
  std::vector<int64_t> ids;
  std::string line, word;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    while (words >> word) ids.push_back(grow ? vocabulary.add(word) : vocabulary.find(word));
    ids.push_back(grow ? vocabulary.add("<eos>") : vocabulary.find("<eos>"));
  }
  if (in.bad()) throw UserError(fmt::format("cannot read {}", path.string()));
  return at::tensor(ids, at::kLong);
}

struct Streams {
  at::Tensor train, valid;
  int64_t vocabulary = 0;
};

Streams readCorpus(const std::string& dir, int64_t min_tokens) {
  Vocabulary vocabulary;
  Streams s;
  s.train = readTokens(requireTokensFile(dir, "wiki.train.tokens"), vocabulary, /*grow=*/true);
  s.valid = readTokens(requireTokensFile(dir, "wiki.valid.tokens"), vocabulary, /*grow=*/false);
  s.vocabulary = vocabulary.size();
  for (const auto& [stream, name] : {std::pair{s.train, "wiki.train.tokens"}, {s.valid, "wiki.valid.tokens"}}) {
    if (stream.numel() < min_tokens) {
      throw UserError(
          fmt::format("{}/{}: {} tokens, fewer than one sequence of {} needs", dir, name, stream.numel(), min_tokens));
    }
  }
  return s;
}

void requireLength(int64_t length) {
  if (length < 1) throw SettingError("sequence_length", fmt::format("must be >= 1, got {}", length));
}

// Sequences of length + 1 tokens, one after the other (a token is the last
// of one sequence and the first of the next, as with the example's bptt).
Dataset nextTokenSequences(const at::Tensor& stream, int64_t length, int64_t vocabulary, const std::string& name) {
  const int64_t n = (stream.numel() - 1) / length;
  const auto windows = stream.narrow(0, 0, n * length + 1);
  Dataset d;
  d.inputs = windows.narrow(0, 0, n * length).view({n, length});
  d.targets = windows.narrow(0, 1, n * length).view({n, length});
  d.classes = vocabulary;
  d.name = name;
  return d;
}

Dataset maskedSequences(const at::Tensor& stream, int64_t length, int64_t vocabulary, at::Generator& gen,
                        const std::string& name) {
  const int64_t n = (stream.numel() + length - 1) / length;
  auto words = at::full({n * length}, kPad, at::kLong);
  words.narrow(0, 0, stream.numel()).copy_(stream);
  words = words.view({n, length});
  const auto chosen = at::rand({n, length}, gen).lt(kMaskedFraction).logical_and(words.ne(kPad));
  const auto how = at::rand({n, length}, gen);
  const auto random_words = at::randint(kUnknown + 1, vocabulary, {n, length}, gen, at::kLong);
  auto inputs = at::where(chosen.logical_and(how.lt(kReadMask)), at::full_like(words, kMask), words);
  inputs = at::where(chosen.logical_and(how.ge(kReadMask)).logical_and(how.lt(kReadMask + kReadRandom)), random_words,
                     inputs);
  Dataset d;
  d.inputs = inputs;
  d.targets = at::where(chosen, words, at::full_like(words, kIgnoreIndex));
  d.classes = vocabulary;
  d.name = name;
  return d;
}

}  // namespace

Dataset languageModelData(const std::string& dir, int64_t length) {
  requireLength(length);
  const auto streams = readCorpus(dir, length + 1);
  const auto name = fmt::format("{} (next word, {} tokens a sequence)", dir, length);
  auto data = nextTokenSequences(streams.train, length, streams.vocabulary, name);
  data.heldout = std::make_shared<Dataset>(nextTokenSequences(streams.valid, length, streams.vocabulary, name));
  return data;
}

Dataset maskedLanguageModelData(const std::string& dir, int64_t length, uint64_t seed) {
  requireLength(length);
  const auto streams = readCorpus(dir, 1);
  if (streams.vocabulary <= kUnknown + 1) throw UserError(fmt::format("{}: the training file has no words", dir));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto name = fmt::format("{} (masked words, {} tokens a sequence)", dir, length);
  auto data = maskedSequences(streams.train, length, streams.vocabulary, gen, name);
  data.heldout = std::make_shared<Dataset>(maskedSequences(streams.valid, length, streams.vocabulary, gen, name));
  return data;
}

}  // namespace hfta::train
