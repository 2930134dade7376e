"""Nothing lost, ever: the commands' writes failing for real, and Ctrl-C.

A write fails here the way a full disk or a quota makes it fail: the
kernel refuses it. RLIMIT_FSIZE (with SIGXFSZ ignored) makes every write
past a size fail with EFBIG, at any point of the file, the last flush
included; where the machine allows it, a small tmpfs also fills up
(ENOSPC). Each time the command must exit 2 with a message naming the
file, leave an existing output as it was, write nothing of a group of
outputs, and leave no temporary file behind. Ctrl-C (SIGINT) while
hfta-fuse writes must leave no temporary file either.

python tests/python/test_writes.py --fuse BUILD/tools/hfta-fuse --split BUILD/tools/hfta-split \
    --train BUILD/tools/hfta-train --runtime BUILD/runtime/libhfta_runtime.so
"""
import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import cnn  # noqa: E402
import mlp  # noqa: E402


def run_limited(command, max_file_size=None):
    """Runs `command`; with `max_file_size`, no file it writes may grow past it."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_size, resource.RLIM_INFINITY))
    return subprocess.run(command, capture_output=True, text=True,
                          preexec_fn=limit if max_file_size is not None else None)


def expect_refused(result, *words):
    assert result.returncode == 2, f"exit {result.returncode}, expected 2:\n{result.stdout}{result.stderr}"
    for word in words:
        assert word in result.stderr, f"{word!r} not in the message: {result.stderr}"


def temporaries(folder):
    """Files an hfta write leaves while it works: .NAME.tmp-PID-N, .NAME.old-PID-N."""
    found = []
    for root, _, files in os.walk(folder):
        found += [os.path.join(root, f) for f in files if ".tmp-" in f or ".old-" in f]
    return found


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check_fuse(args, tmp, members):
    good = os.path.join(tmp, "good.pt")
    subprocess.run([args.fuse, *members, "-o", good], check=True, capture_output=True)
    size = os.path.getsize(good)
    out = os.path.join(tmp, "fused.pt")
    with open(out, "wb") as f:
        f.write(b"the good file of an earlier run")
    # A limit in the middle, and one in the last bytes: the final flush fails.
    for limit in (size // 2, size - 10):
        result = run_limited([args.fuse, *members, "-o", out, "--report-json", os.path.join(tmp, "r.json")], limit)
        expect_refused(result, "cannot write", "fused.pt", "File too large", "nothing was written")
        assert read(out) == b"the good file of an earlier run", "a failed write replaced the good file"
        assert not os.path.exists(os.path.join(tmp, "r.json")), "the report was written without its module"
        assert not temporaries(tmp), temporaries(tmp)
    print(f"hfta-fuse: writes failing at {size // 2} and {size - 10} of {size} bytes refused cleanly")


def check_split(args, tmp, fused):
    folder = os.path.join(tmp, "members")
    os.makedirs(folder)
    subprocess.run([args.split, fused, "--index", "0", "-o", os.path.join(tmp, "one.pt")], check=True,
                   capture_output=True)
    size = os.path.getsize(os.path.join(tmp, "one.pt"))
    result = run_limited([args.split, fused, "--all", "-o", folder], size - 10)
    expect_refused(result, "cannot write", "member_0.pt", "File too large")
    assert os.listdir(folder) == [], os.listdir(folder)
    print("hfta-split --all: a failing write leaves no member and no temporary file")


def check_train(args, tmp, fused):
    out = os.path.join(tmp, "run")
    common = [args.train, fused, "--lr", "0.01,0.02", "--batch-size", "128", "--threads", "1", "--out", out]
    subprocess.run(common + ["--epochs", "1", "--checkpoint-every", "1"], check=True, capture_output=True)
    csv_one, json_one = read(os.path.join(out, "metrics.csv")), read(os.path.join(out, "metrics.json"))
    checkpoint = os.path.join(out, "checkpoint")
    state_one = read(os.path.join(checkpoint, "state.pt"))
    # Two epochs' metrics.json is larger than the limit, their metrics.csv
    # smaller: the second epoch's files must come as a pair or not at all.
    limit = len(json_one) + 100
    assert len(csv_one) * 2 < limit < len(json_one) * 2
    result = run_limited(common + ["--epochs", "2"], limit)
    expect_refused(result, "metrics.json", "File too large", "are as they were")
    assert read(os.path.join(out, "metrics.csv")).count(b"\n") == csv_one.count(b"\n"), "metrics.csv alone moved on"
    assert not temporaries(tmp), temporaries(tmp)
    # A checkpoint that cannot be written leaves the last one whole.
    result = run_limited(common + ["--epochs", "2", "--checkpoint-every", "1"], 1000)
    expect_refused(result, "checkpoint", "File too large")
    assert read(os.path.join(checkpoint, "state.pt")) == state_one, "the last checkpoint changed"
    assert not os.path.exists(checkpoint + ".partial") and not temporaries(tmp)
    resumed = subprocess.run(common + ["--epochs", "2", "--resume", checkpoint], capture_output=True, text=True)
    assert resumed.returncode == 0 and "resumed from" in resumed.stdout, resumed.stderr
    print("hfta-train: metrics as a pair or not at all; a failed checkpoint leaves the last one, which resumes")


def check_full_filesystem(args, members):
    """ENOSPC from a 64 KiB tmpfs (the fused module has ~100 KB), where this machine lets us mount one."""
    with tempfile.TemporaryDirectory() as mount:
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mount],
                                               capture_output=True).returncode != 0:
            print("full filesystem: skipped (cannot mount a tmpfs here)")
            return
        try:
            result = subprocess.run([args.fuse, *members, "-o", os.path.join(mount, "fused.pt")],
                                    capture_output=True, text=True)
            expect_refused(result, "cannot write", "No space left on device")
            assert os.listdir(mount) == [], os.listdir(mount)
        finally:
            subprocess.run(["umount", mount], check=True)
    print("hfta-fuse: a full filesystem is refused cleanly")


def check_interrupt(args, tmp):
    """SIGINT while the fused module is being written: no temporary left."""
    big = []
    for b in range(2):
        torch.manual_seed(b)
        big.append(os.path.join(tmp, f"big_{b}.pt"))
        torch.jit.save(torch.jit.script(mlp.MLP(in_features=2048, hidden=4096)), big[-1])
    out = os.path.join(tmp, "big_fused.pt")
    for attempt in range(5):
        run = subprocess.Popen([args.fuse, *big, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seen = False
        while run.poll() is None and not seen:  # wait for the write to start, then Ctrl-C
            seen = bool(temporaries(tmp))
            time.sleep(0.001)
        if seen:
            run.send_signal(signal.SIGINT)
        run.wait()
        if seen:
            assert run.returncode == -signal.SIGINT, f"ended with {run.returncode}, not by SIGINT"
            assert not temporaries(tmp), temporaries(tmp)
            assert not os.path.exists(out), "an interrupted write left an output"
            print(f"hfta-fuse: Ctrl-C while writing leaves nothing (attempt {attempt + 1})")
            return
        os.remove(out)
    raise AssertionError("the write was never caught in flight")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--fuse", "--split", "--train", "--runtime"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        members = []
        for b in range(2):
            torch.manual_seed(b)
            members.append(os.path.join(tmp, f"digits_{b}.pt"))
            torch.jit.save(torch.jit.script(cnn.DigitsCNN()), members[-1])
        fused = os.path.join(tmp, "digits_fused.pt")
        subprocess.run([args.fuse, *members, "-o", fused], check=True, capture_output=True)
        for check in (lambda: check_fuse(args, tmp, members), lambda: check_split(args, tmp, fused),
                      lambda: check_train(args, tmp, fused), lambda: check_full_filesystem(args, members),
                      lambda: check_interrupt(args, tmp)):
            check()
    print("test_writes: OK")


if __name__ == "__main__":
    main()
