#pragma once
// Word-level text in WikiText-2's format (a folder with wiki.train.tokens and
// wiki.valid.tokens: space-separated words, one paragraph per line) as
// training data for the Transformers of examples/text.py.
//
// The vocabulary comes from the training file: ids 0, 1, 2 are <pad>,
// <mask> and <unk>, then every word in the order of its first appearance,
// each line's words followed by <eos> (as PyTorch's word_language_model
// reads the corpus). Words of the validation file that the training file
// lacks are <unk>. examples/text.py's vocabulary_size() counts the same.
#include <string>

#include "train/dataset.h"

namespace hfta::train {

// Ignored targets (padding, unmasked positions): cross entropy's default.
constexpr int64_t kIgnoreIndex = -100;

// Language modelling: the token stream cut into sequences of `length` + 1
// tokens; inputs [N, length] are each sequence's first `length` tokens,
// targets [N, length] the next token at every position. The validation file
// is the held-out split. classes = the vocabulary's size.
Dataset languageModelData(const std::string& dir, int64_t length);

// Masked-LM pre-training (BERT): the stream cut into sequences of `length`
// tokens (the last padded with <pad>); 15% of the positions (drawn from
// `seed`) are to be predicted: 80% of them read <mask>, 10% a random word,
// 10% the word itself; targets hold the word there and kIgnoreIndex
// elsewhere.
Dataset maskedLanguageModelData(const std::string& dir, int64_t length, uint64_t seed);

}  // namespace hfta::train
