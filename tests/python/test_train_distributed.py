"""hfta-train data parallel (docs/distributed.md), on this machine's
loopback with Gloo:

1. Two ranks under torchrun train as one process does on the same global
   batches, per member: the digits CNN with --sync-batch-norm, and an MLP
   (no batch norm) with each member's own stream of batches, one member
   diverging (frozen on both ranks, as in one process). Batches of 29
   leave a last batch of one sample, so one rank computes a stand-in there.
   Without --sync-batch-norm the CNN's batch norm sees each rank's shard
   only: that run must differ from one process's (what the flag is for).
2. A rank killed mid-run (the two started by hand, with torchrun's
   variables, the CNN with --sync-batch-norm: the other meets the dead rank
   in a batch norm's sum inside the graph): the other stops at once with an
   error that names its rank, the epoch and the intact checkpoint, which is
   whole and resumes.
3. SIGINT to one rank stops both after the next batch; rank 0 writes the
   checkpoint, which goes on in one process.
4. Under torchrun --max-restarts 1 with --auto-resume, a rank killed after
   epoch 2's checkpoint: torchrun restarts both ranks, they go on from the
   checkpoint, and the run ends with the metrics and weights of a run that
   was never stopped, bit for bit.

The runs are in float64. One process and two ranks differ in the order of
their sums only (each rank sums its half of a batch, then the halves are
added; batch norm's statistics likewise). As in test_train_equivalence.py,
training amplifies that rounding over the run's steps (here 2 epochs of 12
steps at learning rates up to 0.2 with momentum 0.9) by far less than the
1e-9 relative tolerance allows for: float64's unit roundoff is 1.1e-16.
The runs compared bit for bit read the forms they run from a cache of the
test's own, which earlier runs filled (test_train_resume.py says why).

python tests/python/test_train_distributed.py --train BUILD/tools/hfta-train --fuse BUILD/tools/hfta-fuse \
    --runtime BUILD/runtime/libhfta_runtime.so
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed

import train_cli  # the script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import mlp  # noqa: E402
import cnn  # noqa: E402,F401  (registers the digits CNN)

TOLERANCE = 1e-9  # relative; see above
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--no-python"]
# 320 training samples (of the digits' first 400) in batches of 29: the
# last batch holds one sample, fewer than the ranks.
COMMON = ["--momentum", "0.9", "--batch-size", "29", "--threads", "1", "--dtype", "float64", "--limit", "400"]
LRS = ["--lr", "0.05,0.1,0.2"]


def metrics(out):
    with open(os.path.join(out, "metrics.json")) as f:
        return json.load(f)


def compare(one, two, what, exact=False):
    """Every metric (wall times aside) of two runs: equal within TOLERANCE,
    or bit for bit. Returns the worst relative difference."""
    assert len(one) == len(two), f"{what}: {len(one)} rows against {len(two)}"
    worst = 0.0
    for a, b in zip(one, two):
        for key, x in a.items():
            y = b[key]
            if key.endswith("seconds"):
                continue
            if isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y):
                continue  # a diverged member's loss, in both
            if exact or not isinstance(x, float):
                assert x == y, f"{what}: epoch {a['epoch']} member {a['member']} {key}: {x!r} against {y!r}"
            else:
                worst = max(worst, abs(x - y) / max(abs(x), 1e-300))
                assert math.isclose(x, y, rel_tol=TOLERANCE), \
                    f"{what}: epoch {a['epoch']} member {a['member']} {key}: {x!r} against {y!r}"
    return worst


def compare_members(one, two, what, exact=False):
    """The exported members' (all but diverged ones) parameters and buffers:
    equal bit for bit, or within TOLERANCE of each tensor's largest value (an
    element near zero carries the rounding of the larger values it was
    computed from)."""
    exported = sorted(f for f in os.listdir(one) if f.startswith("member_"))
    assert exported == sorted(f for f in os.listdir(two) if f.startswith("member_")), f"{what}: other members exported"
    for member in exported:
        a = torch.jit.load(os.path.join(one, member)).state_dict()
        c = torch.jit.load(os.path.join(two, member)).state_dict()
        for name in a:
            if exact or not a[name].is_floating_point():
                ok = torch.equal(a[name], c[name])
            else:
                ok = (a[name] - c[name]).abs().max() <= TOLERANCE * a[name].abs().max()
            assert ok, f"{what}: {member}'s {name} differs"


def train(args, fused, out, *flags, ranks=0, lrs=LRS):
    """hfta-train in one process (ranks=0) or under torchrun; its stdout."""
    launcher = TORCHRUN + ["--nproc-per-node", str(ranks)] if ranks else []
    command = launcher + [args.train, fused, *COMMON, *lrs, "--epochs", "2", "--out", out, "--export-best", out,
                          "--top", "3", *flags]
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.returncode == 0, f"{' '.join(command)} failed:\n{run.stdout}\n{run.stderr}"
    return run.stdout


def fuse(args, tmp, kind, **kwargs):
    paths = mlp.save_members(os.path.join(tmp, kind), kind, 3, **kwargs)
    fused = os.path.join(tmp, f"{kind}.pt")
    subprocess.run([args.fuse, *paths, "-o", fused], check=True, stdout=subprocess.DEVNULL)
    return fused


def two_ranks_equal_one_process(args, tmp, cnn_fused, mlp_fused):
    one = os.path.join(tmp, "cnn_one")
    train(args, cnn_fused, one)
    synced = os.path.join(tmp, "cnn_synced")
    out = train(args, cnn_fused, synced, "--sync-batch-norm", ranks=2)
    assert "data parallel over 2 ranks" in out, out
    worst = compare(metrics(one), metrics(synced), "CNN, 2 ranks with --sync-batch-norm against 1 process")
    compare_members(one, synced, "CNN, 2 ranks with --sync-batch-norm against 1 process")
    print(f"CNN: 2 ranks with --sync-batch-norm = 1 process (worst relative difference {worst:.1e})")

    per_shard = os.path.join(tmp, "cnn_per_shard")
    train(args, cnn_fused, per_shard, ranks=2)
    a, b = metrics(one), metrics(per_shard)
    assert a[0]["train_loss"] != b[0]["train_loss"], "per-shard batch norm trained as one process: it should not"
    print("CNN: 2 ranks with per-shard batch norm differ from 1 process, as they should")

    # Member 2's learning rate overflows its weights at once: it diverges,
    # and is frozen, on both ranks as in one process.
    one, two = os.path.join(tmp, "mlp_one"), os.path.join(tmp, "mlp_two")
    diverging = ["--lr", "0.05,0.1,1e300"]
    train(args, mlp_fused, one, "--own-streams", lrs=diverging)
    train(args, mlp_fused, two, "--own-streams", ranks=2, lrs=diverging)
    worst = compare(metrics(one), metrics(two), "MLP with own streams, 2 ranks against 1 process")
    compare_members(one, two, "MLP with own streams, 2 ranks against 1 process")
    assert [r["diverged"] for r in metrics(two) if r["member"] == 2] == [True, True], metrics(two)
    print(f"MLP, own streams, member 2 diverging: 2 ranks = 1 process (worst relative difference {worst:.1e})")


def a_killed_rank_stops_the_other(args, tmp, fused):
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    out = os.path.join(tmp, "killed")
    checkpoint = os.path.join(out, "checkpoint")
    ranks = []
    for rank in range(2):
        env = dict(os.environ, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True")
        ranks.append(subprocess.Popen([args.train, fused, *COMMON, *LRS, "--epochs", "20", "--checkpoint-every", "1",
                                       "--sync-batch-norm", "--out", out], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for line in ranks[0].stdout:
        if line.startswith("epoch   1"):
            ranks[1].send_signal(signal.SIGKILL)
            break
    start = time.monotonic()
    _, error = ranks[0].communicate(timeout=120)
    seconds = time.monotonic() - start
    ranks[1].wait()
    assert ranks[0].returncode == 2, f"rank 0 exited with {ranks[0].returncode}:\n{error}"
    assert "rank 0 of 2, epoch 2" in error and f"{checkpoint} (after epoch 1) is intact" in error, error
    print(f"rank 1 killed: rank 0 stopped {seconds:.1f} s later: {error.strip().splitlines()[-1][:160]}...")
    state = torch.load(os.path.join(checkpoint, "state.pt"), weights_only=False)  # (our own file)
    assert state["epochs_done"] == 1 and state["batches_done"] == 0, state
    resumed = subprocess.run([args.train, fused, *COMMON, *LRS, "--epochs", "2", "--resume", checkpoint, "--out", out],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
    assert "resumed from" in resumed and "epoch   2" in resumed, resumed
    print("the checkpoint after epoch 1 is whole: one process resumed it and trained epoch 2")


def a_stop_asked_of_one_rank_stops_both(args, tmp, fused):
    """SIGINT to rank 1 alone: both ranks stop after the next batch (the
    request travels with the losses' sum), rank 0 writes the checkpoint,
    both exit 130, and the checkpoint goes on in one process."""
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    out = os.path.join(tmp, "stopped")
    ranks = []
    for rank in range(2):
        env = dict(os.environ, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(store.port), TORCHELASTIC_USE_AGENT_STORE="True")
        ranks.append(subprocess.Popen([args.train, fused, *COMMON, *LRS, "--epochs", "20", "--out", out], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for line in ranks[0].stdout:
        if line.startswith("epoch   1"):
            time.sleep(0.02)
            ranks[1].send_signal(signal.SIGINT)
            break
    errors = [rank.communicate(timeout=120)[1] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [130, 130], ([rank.returncode for rank in ranks], errors)
    assert "interrupted; checkpoint in" in errors[0], errors[0]
    state = torch.load(os.path.join(out, "checkpoint", "state.pt"), weights_only=False)  # (our own file)
    assert state["epochs_done"] >= 1, state
    print(f"SIGINT to rank 1: both ranks stopped after epoch {state['epochs_done']} and {state['batches_done']} "
          "batches of the next; rank 0 wrote the checkpoint")
    subprocess.run([args.train, fused, *COMMON, *LRS, "--epochs", str(state["epochs_done"] + 1), "--resume",
                    os.path.join(out, "checkpoint"), "--out", out], check=True, stdout=subprocess.DEVNULL)


def children(pid):
    """The processes whose parent is `pid`, with their environment's RANK."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent != pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            found[int(entry)] = env.get(b"RANK", b"").decode()
        except (OSError, ValueError, IndexError):
            continue
    return found


def torchrun_restarts_from_the_checkpoint(args, tmp, fused):
    whole = os.path.join(tmp, "whole")
    flags = ["--epochs", "4", "--checkpoint-every", "1", "--auto-resume", "--export-best"]
    subprocess.run(TORCHRUN + ["--nproc-per-node", "2", args.train, fused, *COMMON, *LRS, *flags, whole, "--top", "3",
                               "--out", whole], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    cut = os.path.join(tmp, "cut")
    run = subprocess.Popen(TORCHRUN + ["--nproc-per-node", "2", "--max-restarts", "1", args.train, fused, *COMMON,
                                       *LRS, *flags, cut, "--top", "3", "--out", cut],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    for line in run.stdout:
        if line.startswith("epoch   2"):
            killed = [pid for pid, rank in children(run.pid).items() if rank == "1"]
            assert len(killed) == 1, f"rank 1 is not one child of torchrun: {children(run.pid)}"
            os.kill(killed[0], signal.SIGKILL)
            break
    rest, error = run.communicate(timeout=300)
    assert killed, "no epoch 2 line came"
    assert run.returncode == 0, f"torchrun did not finish the run after the restart ({run.returncode}):\n{error}"
    assert "resumed from" in rest, rest
    print(f"rank 1 killed after epoch 2; torchrun restarted the ranks: {rest.splitlines()[0]}")
    compare(metrics(whole), metrics(cut), "killed, restarted and resumed against never stopped", exact=True)
    compare_members(whole, cut, "killed, restarted and resumed against never stopped", exact=True)
    print("restarted run = a run never stopped (metrics and weights, bit for bit)")


def main():
    args = train_cli.parse_args("--fuse")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HFTA_CACHE_DIR"] = os.path.join(tmp, "cache")  # see above
        cnn_fused = fuse(args, tmp, "digits")
        mlp_fused = fuse(args, tmp, "mlp", in_features=64)
        two_ranks_equal_one_process(args, tmp, cnn_fused, mlp_fused)
        a_killed_rank_stops_the_other(args, tmp, cnn_fused)
        a_stop_asked_of_one_rank_stops_both(args, tmp, mlp_fused)
        torchrun_restarts_from_the_checkpoint(args, tmp, cnn_fused)
    print("test_train_distributed: OK")


if __name__ == "__main__":
    main()
