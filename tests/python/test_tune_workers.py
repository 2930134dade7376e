"""hfta-tune over several workers (tune/worker_pool.h) against one process:

1. A Hyperband search (R = 9, eta = 3: 17 trials) with --workers 2, and the
   same under torchrun with 2 processes, gives the trials, every trial's
   metrics epoch by epoch, the rungs' verdicts and the best trial of the
   search in one process, bit for bit; and both workers trained arrays.
2. With --workers 2 and every trial in an array of its own, worker 1 is
   killed (SIGKILL) in the middle of an array of several epochs: a new
   worker 1 goes on with that array from its last checkpoint, and the
   search ends with the results of one never disturbed, bit for bit.
3. Under torchrun --max-restarts 1, rank 1 killed in the middle of an
   array: torchrun starts both ranks again, they go on with the run (its
   journal and the arrays' checkpoints), and the search ends as 2. does.

In float64 with the forms of the heuristic (HFTA_AUTOTUNE=0): an array
trains to the same bits whichever worker trains it, so results can be
compared exactly. (Forms timed by each worker could differ between
workers, and with them the rounding.)

python tests/python/test_tune_workers.py --tune BUILD/tools/hfta-tune
"""
import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402,F401  (registers the digits CNN)

SPACE = {"lr": {"loguniform": [0.003, 0.3]}, "momentum": {"uniform": [0.5, 0.95]},
         "weight_decay": {"choice": [0, 0.0001, 0.001]}, "seed": {"int": [0, 99]}}
RUN = ["--max-epochs", "9", "--eta", "3", "--batch-size", "32", "--seed", "3", "--threads", "1", "--dtype", "float64"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--no-python"]


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def results(out):
    """What a search decided and measured: trials.csv, rungs.csv, and
    metrics.csv without the wall times."""
    metrics = [{k: v for k, v in row.items() if not k.endswith("seconds")}
               for row in read_csv(os.path.join(out, "metrics.csv"))]
    return read_csv(os.path.join(out, "trials.csv")), read_csv(os.path.join(out, "rungs.csv")), metrics


def best(log):
    return [line for line in log.splitlines() if "the best trial" in line]


def command(args, tmp, out, *extra):
    return [args.tune, os.path.join(tmp, "space.json"), "--model", os.path.join(tmp, "digits_0.pt"), "--out", out,
            *RUN, *extra]


def same_as_one_process(args, tmp):
    flags = ["--limit", "600", "--array-size", "4"]
    one = os.path.join(tmp, "one")
    one_log = subprocess.run(command(args, tmp, one, *flags), check=True, stdout=subprocess.PIPE, text=True).stdout
    for name, launcher, extra in [("--workers 2", [], ["--workers", "2"]),
                                  ("torchrun, 2 processes", TORCHRUN + ["--nproc-per-node", "2"], [])]:
        out = os.path.join(tmp, name.split()[0].strip("-,"))
        log = subprocess.run(launcher + command(args, tmp, out, *flags, *extra), check=True, stdout=subprocess.PIPE,
                             text=True).stdout
        assert results(out) == results(one), f"{name}: the search ended elsewhere than in one process"
        assert best(log) == [line.replace(one, out) for line in best(one_log)], (best(log), best(one_log))
        workers = {a["worker"] for a in read_csv(os.path.join(out, "arrays.csv"))}
        assert workers == {"0", "1"}, f"{name}: arrays trained by workers {workers}"
        print(f"{name}: the same trials, metrics, rungs and best trial as one process; both workers trained")


# Hyperband's rungs with R = 9, eta = 3 end after 1, 3 and 9 epochs: an
# array checkpointed after any other number of epochs has more to go.
RUNG_ENDS = (1, 3, 9)


def array_in_flight(out, own):
    """An array (not rank 0's own) with a checkpoint after some of its epochs and more to go."""
    arrays = os.path.join(out, "arrays")
    for name in os.listdir(arrays) if os.path.isdir(arrays) else []:
        if name in own or not name.isdigit():
            continue
        try:
            state = torch.load(os.path.join(arrays, name, "state.pt"), weights_only=False)  # (our own file)
        except Exception:  # not written yet, or being replaced
            continue
        if state["epochs_done"] > 0 and state["epochs_done"] not in RUNG_ENDS:
            return name
    return None


def kill_rank_one_mid_array(launch, out):
    """Starts `launch` (a search of 2 workers writing to `out`) and SIGKILLs
    the worker of rank 1, a child of the launched process, once an array
    that rank 0 did not announce as its own has a checkpoint with epochs to
    go. Returns the array, rank 0's output, its errors and its exit code."""
    run = subprocess.Popen(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []  # rank 0's output so far, read by a thread
    reader = threading.Thread(target=lambda: lines.extend(run.stdout), daemon=True)
    reader.start()
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and run.poll() is None and time.monotonic() < deadline:
        # Rank 0 announces the arrays it trains itself: "array   N (bracket ...".
        own = {line.split()[2] for line in list(lines) if line.startswith("hfta-tune: array") and "(" in line
               and " on worker " not in line and "from the journal" not in line}
        victim = array_in_flight(out, own)
        if victim is not None:
            ranks = {rank_of(pid): pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                     if parent_of(pid) == run.pid}
            os.kill(ranks["1"], signal.SIGKILL)
        time.sleep(0.005)
    error = run.stderr.read()
    run.wait(timeout=300)
    reader.join()
    assert victim is not None, "rank 1 never had an array in flight to kill:\n" + "".join(lines)
    return victim, "".join(lines), error, run.returncode


def a_killed_worker_loses_nothing(args, tmp):
    flags = ["--limit", "900", "--array-size", "1"]
    calm = os.path.join(tmp, "calm")
    subprocess.run(command(args, tmp, calm, *flags), check=True, stdout=subprocess.DEVNULL)

    out = os.path.join(tmp, "killed")
    victim, log, error, returncode = kill_rank_one_mid_array(command(args, tmp, out, *flags, "--workers", "2"), out)
    assert returncode == 0, f"the search did not survive its worker's death ({returncode}):\n{error}"
    assert "worker 1 was killed" in error, error
    went_on = [line for line in log.splitlines() if "going on from its checkpoint after epoch" in line]
    assert went_on, f"no array went on from a checkpoint:\n{log}"
    print(f"worker 1 killed during array {victim}: {went_on[0].split(': ', 1)[1]}")
    assert results(out) == results(calm), "the search with a killed worker ended elsewhere"
    print("a killed worker lost nothing: the same trials, metrics and rungs as a search never disturbed")


def torchrun_restarts_the_search(args, tmp):
    """Under torchrun --max-restarts 1, rank 1 killed mid-array: torchrun
    stops rank 0 and starts both again; they go on with the run (its
    journal, the arrays' checkpoints) and end where a search never disturbed
    ends."""
    flags = ["--limit", "900", "--array-size", "1"]
    calm = os.path.join(tmp, "calm")  # from a_killed_worker_loses_nothing
    out = os.path.join(tmp, "restarted")
    _, log, error, returncode = kill_rank_one_mid_array(
        TORCHRUN + ["--nproc-per-node", "2", "--max-restarts", "1"] + command(args, tmp, out, *flags), out)
    assert returncode == 0, f"torchrun did not finish the search after the restart ({returncode}):\n{error}"
    assert "from the journal" in log, f"the restarted ranks did not go on with the run:\n{log}"
    assert results(out) == results(calm), "the search restarted by torchrun ended elsewhere"
    print("torchrun restarted the search after rank 1 was killed: the same results as a search never disturbed")


def rank_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    return env.get(b"RANK", b"").decode()


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", required=True)
    args = parser.parse_args()
    os.environ["HFTA_AUTOTUNE"] = "0"  # see above
    with tempfile.TemporaryDirectory() as tmp:
        mlp.save_members(tmp, "digits", 1)
        with open(os.path.join(tmp, "space.json"), "w") as f:
            json.dump(SPACE, f)
        same_as_one_process(args, tmp)
        a_killed_worker_loses_nothing(args, tmp)
        torchrun_restarts_the_search(args, tmp)
    print("test_tune_workers: OK")


if __name__ == "__main__":
    main()
