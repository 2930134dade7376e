"""Converts the English fortune-cookie collection that Debian's `fortunes`
package ships (quotations, literature, jokes and verse: about 2.5 MB of
real English text) into WikiText-2's word-level format in OUT_DIR:
wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens, hfta-train's
default text data set, which needs no download.

As WikiText-2: one paragraph (here one fortune) per line, words and
punctuation separated by spaces, and words seen fewer than 3 times in the
training split replaced by <unk>. Fortunes go to train / valid / test in a
fixed 90 / 5 / 5 split.

python scripts/make_corpus.py OUT_DIR [--source /usr/share/games/fortunes]
"""
import argparse
import collections
import os
import random
import re

# WikiText-2 keeps words of 3 or more occurrences.
MIN_COUNT = 3
# Words, numbers, and each punctuation mark on its own (WikiText splits
# punctuation off the words; "don't" stays one word here).
TOKEN = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*|[^\sA-Za-z0-9]")


def fortunes(source):
    """The fortunes of every English file in `source` (files of fortunes
    separated by lines holding "%"; .dat indexes and .u8 links skipped)."""
    texts = []
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        if "." in name or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.extend(t.strip() for t in f.read().split("\n%\n") if t.strip())
    return texts


def tokenize(text):
    return TOKEN.findall(text)


def main(out_dir, source):
    texts = fortunes(source)
    if not texts:
        raise SystemExit(f"make_corpus: no fortunes in {source}: install Debian's fortunes package")
    random.Random(14).shuffle(texts)
    valid_n = test_n = len(texts) // 20
    splits = {"valid": texts[:valid_n], "test": texts[valid_n:valid_n + test_n], "train": texts[valid_n + test_n:]}
    tokens = {name: [tokenize(t) for t in split] for name, split in splits.items()}
    counts = collections.Counter(w for line in tokens["train"] for w in line)
    os.makedirs(out_dir, exist_ok=True)
    for name, lines in tokens.items():
        path = os.path.join(out_dir, f"wiki.{name}.tokens")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for line in lines:
                f.write(" " + " ".join(w if counts[w] >= MIN_COUNT else "<unk>" for w in line) + " \n")
        os.replace(path + ".tmp", path)
    words = sum(len(line) for line in tokens["train"])
    kept = sum(1 for c in counts.values() if c >= MIN_COUNT)
    print(f"make_corpus: {len(texts)} fortunes, {words} training words, {kept} kept in the vocabulary -> {out_dir}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--source", default="/usr/share/games/fortunes")
    args = parser.parse_args()
    main(args.out_dir, args.source)
