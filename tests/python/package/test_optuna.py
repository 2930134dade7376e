"""hfta.optuna: trials trained B at a time in fused arrays find what the same
trials trained alone find; pruned members leave their array; two worker
processes share one SQLite study."""
import os
import subprocess
import sys

import optuna
import pytest
import torch
import torch.nn.functional as F

import hfta
import hfta.optuna
from conftest import Mlp

optuna.logging.set_verbosity(optuna.logging.WARNING)
EPOCHS = 3
TRIALS = [dict(lr=lr, weight_decay=wd, batch_size=bs)
          for lr, wd, bs in [(1e-3, 0.0, 16), (3e-3, 1e-2, 32), (1e-2, 1e-3, 16), (3e-2, 0.0, 32),
                             (1e-1, 1e-2, 16), (3e-4, 1e-1, 32)]]


def data():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(96, 24, generator=generator)
    y = x[:, :10].argmax(1)
    return x[:64], y[:64], x[64:], y[64:]


def suggest(trial):
    return dict(lr=trial.suggest_float("lr", 1e-4, 1.0, log=True),
                weight_decay=trial.suggest_float("weight_decay", 0.0, 0.1),
                batch_size=trial.suggest_categorical("batch_size", [16, 32]))


def batches(x, y, size):
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def model_of(trial):
    torch.manual_seed(trial.number)
    return Mlp()


def train_fused(array, sizes=None):
    x, y, x_val, y_val = data()
    fused = hfta.fuse([model_of(t) for t in array.trials], shared_input=True)
    opt = hfta.optim.AdamW(fused.parameters(), lr=array.values("lr"), weight_decay=array.values("weight_decay"))
    for epoch in range(EPOCHS):
        if sizes is not None:
            sizes.append(len(array))
        for xb, yb in batches(x, y, array.shared["batch_size"]):
            opt.zero_grad()
            hfta.losses(fused(xb), yb).sum().backward()
            opt.step()
        with torch.no_grad():
            held_out = hfta.losses(fused(x_val), y_val)
        keep = array.report(held_out, epoch)
        if not any(keep):
            return
        if not all(keep):
            fused, opt = hfta.take(fused, [b for b, k in enumerate(keep) if k], opt)
            held_out = held_out[torch.tensor(keep)]
    array.finish(held_out)


def objective_alone(trial):
    params = suggest(trial)
    x, y, x_val, y_val = data()
    model = model_of(trial)
    opt = torch.optim.AdamW(model.parameters(), lr=params["lr"], weight_decay=params["weight_decay"])
    for epoch in range(EPOCHS):
        for xb, yb in batches(x, y, params["batch_size"]):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        with torch.no_grad():
            held_out = F.cross_entropy(model(x_val), y_val).item()
        trial.report(held_out, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return held_out


def study_of(pruner):
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
    for params in TRIALS:
        study.enqueue_trial(params)
    return study


def run_both(pruner_fused, pruner_alone, sizes=None):
    fused = study_of(pruner_fused)
    hfta.optuna.optimize(fused, suggest, lambda a: train_fused(a, sizes), n_trials=len(TRIALS), array_size=4,
                         fusible=["lr", "weight_decay"])
    alone = study_of(pruner_alone)
    alone.optimize(objective_alone, n_trials=len(TRIALS))
    return fused, alone


def test_the_same_best_trial_and_values_as_the_trials_alone():
    fused, alone = run_both(optuna.pruners.NopPruner(), optuna.pruners.NopPruner())
    assert fused.best_trial.params == alone.best_trial.params
    assert fused.best_value == pytest.approx(alone.best_value, rel=1e-9)
    by_params = {tuple(sorted(t.params.items())): t.value for t in alone.trials}
    assert len(fused.trials) == len(TRIALS)
    for trial in fused.trials:
        assert trial.state == optuna.trial.TrialState.COMPLETE
        assert trial.value == pytest.approx(by_params[tuple(sorted(trial.params.items()))], rel=1e-9)


def test_pruned_members_leave_the_array_and_the_rest_train_on():
    # A pruner that decides for each trial on its own values: the same
    # trials are pruned fused and alone, whatever the order of reports.
    sizes = []
    fused, alone = run_both(optuna.pruners.ThresholdPruner(upper=2.3), optuna.pruners.ThresholdPruner(upper=2.3),
                            sizes)
    states = {tuple(sorted(t.params.items())): (t.state, t.value) for t in alone.trials}
    pruned = [t for t in fused.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert 0 < len(pruned) < len(TRIALS), "the threshold should prune some trials and keep others"
    for trial in fused.trials:
        state, value = states[tuple(sorted(trial.params.items()))]
        assert trial.state == state
        if state == optuna.trial.TrialState.COMPLETE:
            assert trial.value == pytest.approx(value, rel=1e-9)
    assert any(later < earlier for earlier, later in zip(sizes, sizes[1:])), f"no array shrank: {sizes}"


@pytest.mark.parametrize("pruner", [optuna.pruners.MedianPruner(n_startup_trials=1),
                                    optuna.pruners.SuccessiveHalvingPruner(),
                                    optuna.pruners.HyperbandPruner(min_resource=1, max_resource=EPOCHS)])
def test_optunas_pruners_decide_per_member(pruner):
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=1))
    hfta.optuna.optimize(study, suggest, train_fused, n_trials=8, array_size=4, fusible=["lr", "weight_decay"])
    states = [t.state for t in study.trials]
    assert len(states) == 8
    assert set(states) <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    assert optuna.trial.TrialState.COMPLETE in states


# A worker process: the storage holds the study, not its pruner (each
# process gives its own; without pruning every trial completes).
WORKER = r"""
import sys, optuna, torch
sys.path.insert(0, sys.argv[2])
import hfta.optuna, test_optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
torch.set_default_dtype(torch.float64)
study = optuna.load_study(study_name="shared", storage=sys.argv[1], pruner=optuna.pruners.NopPruner())
hfta.optuna.optimize(study, test_optuna.suggest, test_optuna.train_fused, n_trials=4, array_size=2,
                     fusible=["lr", "weight_decay"])
"""


def test_two_worker_processes_share_one_sqlite_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="shared", storage=storage, direction="minimize",
                        sampler=optuna.samplers.RandomSampler(seed=2))
    here = os.path.dirname(os.path.abspath(__file__))
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, storage, here]) for _ in range(2)]
    assert [w.wait(timeout=240) for w in workers] == [0, 0]
    study = optuna.load_study(study_name="shared", storage=storage)
    assert len(study.trials) == 8
    assert sorted(t.number for t in study.trials) == list(range(8))
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_reporting_for_the_wrong_members_is_a_value_error():
    study = optuna.create_study()

    def train(array):
        array.report([1.0] * (len(array) + 1), 0)

    with pytest.raises(ValueError, match="values for 2 members"):
        hfta.optuna.optimize(study, suggest, train, n_trials=2, array_size=2, fusible=["lr", "weight_decay",
                                                                                         "batch_size"])
    assert all(t.state == optuna.trial.TrialState.FAIL for t in study.trials)
