"""hfta-train on text against the loop a PyTorch user writes: 3 members of
the word language model (also with tied weights, and the LSTM one) and of
BERT (examples/text.py, tiny sizes), fused by
hfta-fuse and trained by hfta-train on a small corpus in WikiText-2's format
(next-word and masked-word data), and each member trained alone in plain
PyTorch on the same sequences in the same order, give the same per-epoch
training loss, held-out loss and accuracy.

The corpus is read here as train/text_data.h documents it (the vocabulary:
<pad>, <mask>, <unk>, then words by first appearance with <eos> per line;
validation words the training file lacks are <unk>; BERT's masks drawn from
the seed), so the comparison checks hfta-train's reader too. Float64 on both
sides: the tolerance, 1e-9 relative, follows as in
test_train_against_pytorch.py. Bad text data ends with exit 2 and a message.

python tests/python/test_train_text.py --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

import train_cli  # the script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
import text  # noqa: E402

MEMBERS, LENGTH, BATCH, EPOCHS, SEED = 3, 8, 8, 2, 7
LRS = [0.05, 0.1, 0.2]
TOLERANCE = 1e-9
IGNORE = -100
TRAIN_TEXT = [
    "the cat sat on the mat .",
    "",
    "a dog sat on the log , and the cat ran .",
    "the mat is red ; the log is brown .",
] * 12
VALID_TEXT = ["the dog ran on the red mat .", "a zebra sat on the log ."]  # "zebra" is <unk>


def write_corpus(folder):
    os.makedirs(folder)
    for name, lines in (("train", TRAIN_TEXT), ("valid", VALID_TEXT)):
        with open(os.path.join(folder, f"wiki.{name}.tokens"), "w") as f:
            f.write("".join(f" {line} \n" for line in lines))


def read_corpus(folder):
    vocabulary = {"<pad>": 0, "<mask>": 1, "<unk>": 2}
    streams = {}
    for name in ("train", "valid"):
        ids = []
        with open(os.path.join(folder, f"wiki.{name}.tokens")) as f:
            for line in f:
                for word in line.split() + ["<eos>"]:
                    if name == "train":
                        vocabulary.setdefault(word, len(vocabulary))
                    ids.append(vocabulary.get(word, 2))
        streams[name] = torch.tensor(ids)
    return streams, len(vocabulary)


def next_word(stream):
    n = (len(stream) - 1) // LENGTH
    return stream[:n * LENGTH].view(n, LENGTH), stream[1:n * LENGTH + 1].view(n, LENGTH)


def masked_words(stream, vocabulary, gen):
    n = (len(stream) + LENGTH - 1) // LENGTH
    words = torch.zeros(n * LENGTH, dtype=torch.long)
    words[:len(stream)] = stream
    words = words.view(n, LENGTH)
    chosen = (torch.rand((n, LENGTH), generator=gen) < 0.15) & (words != 0)
    how = torch.rand((n, LENGTH), generator=gen)
    random_words = torch.randint(3, vocabulary, (n, LENGTH), generator=gen)
    inputs = torch.where(chosen & (how < 0.8), torch.ones_like(words), words)
    inputs = torch.where(chosen & (how >= 0.8) & (how < 0.9), random_words, inputs)
    return inputs, torch.where(chosen, words, torch.full_like(words, IGNORE))


def losses(outputs, targets):
    """Sum of the token losses and how many tokens have a target."""
    flat = F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1), ignore_index=IGNORE,
                           reduction="sum")
    return flat, (targets != IGNORE).sum().item()


def train_alone(path, lr, train, heldout):
    model = torch.jit.load(path).double()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    batches = math.ceil(len(train[0]) / BATCH)
    rows = []
    for epoch in range(1, EPOCHS + 1):
        model.train()
        order = torch.randperm(len(train[0]), generator=torch.Generator().manual_seed(SEED * 1000003 + epoch))
        loss_sum = 0.0
        for i in range(batches):
            index = order[i * BATCH:(i + 1) * BATCH]
            opt.zero_grad()
            total, count = losses(model(train[0][index]), train[1][index])
            value = total / max(count, 1)
            value.backward()
            loss_sum += value.item()
            opt.step()
        model.eval()
        with torch.no_grad():
            held, counted, correct = 0.0, 0, 0
            for i in range(0, len(heldout[0]), BATCH):
                x, y = heldout[0][i:i + BATCH], heldout[1][i:i + BATCH]
                out = model(x)
                total, count = losses(out, y)
                held += total.item()
                counted += count
                correct += ((out.argmax(-1) == y) & (y != IGNORE)).sum().item()
        rows.append((loss_sum / batches, held / counted, correct / counted))
    return rows


def run_train(args, *flags):
    return subprocess.run([args.train, *flags], capture_output=True, text=True)


def check_case(args, tmp, corpus, kind, dataset, train, heldout):
    paths = []
    vocabulary = text.vocabulary_size(corpus)
    for b in range(MEMBERS):
        torch.manual_seed(b)
        paths.append(os.path.join(tmp, f"{kind}_{b}.pt"))
        torch.jit.save(torch.jit.script(text.MODELS[kind](vocab=vocabulary)), paths[-1])
    fused = os.path.join(tmp, f"{kind}_fused.pt")
    subprocess.run([os.path.join(os.path.dirname(args.train), "hfta-fuse"), *paths, "-o", fused], check=True,
                   stdout=subprocess.DEVNULL)
    out = os.path.join(tmp, f"{kind}_run")
    result = run_train(args, fused, "--dataset", dataset, "--data", corpus, "--sequence-length", str(LENGTH),
                       "--lr", ",".join(map(str, LRS)), "--seed", str(SEED), "--batch-size", str(BATCH),
                       "--epochs", str(EPOCHS), "--threads", "1", "--dtype", "float64", "--out", out)
    assert result.returncode == 0, result.stderr
    assert f"a vocabulary of {vocabulary} words" in result.stdout, result.stdout
    with open(os.path.join(out, "metrics.json")) as f:
        rows = json.load(f)
    worst = 0.0
    for b in range(MEMBERS):
        expected = train_alone(paths[b], LRS[b], train, heldout)
        got = [r for r in rows if int(r["member"]) == b]
        assert len(got) == EPOCHS
        for epoch, (row, (train_loss, held_loss, accuracy)) in enumerate(zip(got, expected), 1):
            where = f"{kind}: member {b} epoch {epoch}"
            for key, want in (("train_loss", train_loss), ("heldout_loss", held_loss)):
                worst = max(worst, abs(row[key] - want) / abs(want))
                assert math.isclose(row[key], want, rel_tol=TOLERANCE), f"{where}: {key} {row[key]!r} vs {want!r}"
            assert row["heldout_accuracy"] == accuracy, f"{where}: accuracy {row['heldout_accuracy']} vs {accuracy}"
            assert math.isclose(row["heldout_perplexity"], math.exp(held_loss), rel_tol=TOLERANCE), where
    print(f"{kind} on {dataset}: hfta-train vs PyTorch, worst relative loss difference {worst:.2e}")
    return fused


def check_errors(args, tmp, corpus, fused):
    """Bad text data: exit 2 and a message naming what to fix."""
    empty = os.path.join(tmp, "no_valid")
    os.makedirs(empty)
    with open(os.path.join(empty, "wiki.train.tokens"), "w") as f:
        f.write(" a b c \n")
    cases = [
        ((fused, "--dataset", "wikitext", "--data", empty), "wiki.valid.tokens is missing"),
        ((fused, "--dataset", "wikitext", "--data", corpus, "--sequence-length", "0"), "--sequence-length"),
        ((fused, "--dataset", "wikitext", "--data", os.path.join(ROOT, ".data", "fortunes"), "--limit", "4"),
         "build the model with the data's vocabulary size"),
        ((fused, "--dataset", "wikitext", "--data", corpus, "--sequence-length", "8", "--loss", "mse"),
         "text data trains with cross_entropy"),
    ]
    for flags, message in cases:
        result = run_train(args, *flags, "--epochs", "1")
        assert result.returncode == 2, f"{flags}: exit {result.returncode}\n{result.stderr}"
        assert message in result.stderr, f"{flags}: {result.stderr}"
    print(f"bad text data: {len(cases)} cases end with exit 2 and a message")


def main():
    args = train_cli.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus")
        write_corpus(corpus)
        streams, vocabulary = read_corpus(corpus)
        assert vocabulary == text.vocabulary_size(corpus)
        assert (streams["valid"] == 2).sum() == 1, "zebra should read <unk>"
        fused = check_case(args, tmp, corpus, "lm_tiny", "wikitext", next_word(streams["train"]),
                           next_word(streams["valid"]))
        # Tied decoder and embedding: one parameter, stepped once by hfta-train's optimizer;
        # and the LSTM language model, its recurrence fused.
        for kind in ("lm_tiny_tied", "lstm_lm_tiny"):
            check_case(args, tmp, corpus, kind, "wikitext", next_word(streams["train"]), next_word(streams["valid"]))
        gen = torch.Generator().manual_seed(SEED)
        mlm_train = masked_words(streams["train"], vocabulary, gen)
        mlm_valid = masked_words(streams["valid"], vocabulary, gen)
        assert (mlm_train[1] != IGNORE).any() and (mlm_valid[1] != IGNORE).any()
        check_case(args, tmp, corpus, "bert_tiny", "wikitext-mlm", mlm_train, mlm_valid)
        check_errors(args, tmp, corpus, fused)
    print("test_train_text: OK")


if __name__ == "__main__":
    main()
