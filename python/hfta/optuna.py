"""Optuna studies whose trials train B at a time in fused arrays.

    def suggest(trial):                       # the search space, as in any Optuna objective
        return dict(lr=trial.suggest_float("lr", 1e-4, 1e-1, log=True),
                    batch_size=trial.suggest_categorical("batch_size", [32, 64]))

    def train(array):                         # the trials of one array: they agree on batch_size
        fused = hfta.fuse([Net() for _ in array.params], shared_input=True)
        opt = hfta.optim.Adam(fused.parameters(), lr=array.values("lr"))
        for epoch in range(epochs):
            ...                               # batches of array.shared["batch_size"]
            keep = array.report(held_out_accuracy, epoch)     # one value per member
            if not any(keep):
                return
            if not all(keep):                 # pruned members leave; the rest train on
                fused, opt = hfta.take(fused, [b for b, k in enumerate(keep) if k], opt)
        array.finish(held_out_accuracy)

    hfta.optuna.optimize(study, suggest, train, n_trials=32, array_size=8, fusible=["lr"])

Trials are asked `array_size` at a time; those whose settings outside
`fusible` agree train as one array, the others in arrays of their own (as
hfta-tune groups them). Each member reports its own value per epoch; the
study's pruner decides for each member alone, and a pruned trial is told
to the study at once. The study's storage is Optuna's: several processes or
machines given the same storage URL share one study.
"""
import itertools

import optuna

__all__ = ["TrialArray", "optimize"]


class TrialArray:
    """The trials of one fused array, in member order. `params` and
    values() follow the members still training (pruned ones leave)."""

    def __init__(self, study, trials, params, shared):
        self.study = study
        self.trials = list(trials)
        self.params = list(params)
        self.shared = dict(shared)  # the settings they agree on (not fusible)
        self._finished = False

    def __len__(self):
        return len(self.trials)

    def values(self, name):
        """Setting `name` of each member: a list to give an hfta.optim setting."""
        return [p[name] for p in self.params]

    def report(self, values, step):
        """Each member's intermediate value at `step` (a list or a [B]
        tensor). Returns per member whether it trains on; the pruned ones
        are told to the study as pruned and leave this array's members."""
        values = self._values(values)
        keep = []
        for trial, value in zip(self.trials, values):
            trial.report(value, step)
            keep.append(not trial.should_prune())
        for trial, kept in zip(self.trials, keep):
            if not kept:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        self.trials = [t for t, k in zip(self.trials, keep) if k]
        self.params = [p for p, k in zip(self.params, keep) if k]
        return keep

    def finish(self, values):
        """Each remaining member's final value: its trial is complete."""
        for trial, value in zip(self.trials, self._values(values)):
            self.study.tell(trial, value)
        self.trials, self.params = [], []
        self._finished = True

    def fail(self):
        for trial in self.trials:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        self.trials, self.params = [], []

    def _values(self, values):
        values = values.tolist() if hasattr(values, "tolist") else list(values)
        if len(values) != len(self.trials):
            raise ValueError(f"{len(values)} values for {len(self.trials)} members; after a report that pruned "
                             f"some, shrink the array (hfta.take) and report for the members kept")
        return [float(v) for v in values]


def _groups(trials, params, fusible):
    """Trials whose settings outside `fusible` agree, as (shared, trials, params)."""
    def key(p):
        return tuple(sorted((k, repr(v)) for k, v in p.items() if k not in fusible))
    order = sorted(range(len(trials)), key=lambda i: key(params[i]))
    for _, members in itertools.groupby(order, key=lambda i: key(params[i])):
        members = list(members)
        first = params[members[0]]
        shared = {k: v for k, v in first.items() if k not in fusible}
        yield shared, [trials[i] for i in members], [params[i] for i in members]


def optimize(study, suggest, train, n_trials, *, array_size=8, fusible=()):
    """Runs `n_trials` trials of `study` in fused arrays of up to
    `array_size`: suggest(trial) -> the trial's settings (a dict); train(array)
    trains a TrialArray, reporting each epoch and finishing it. A trial that
    train() leaves unfinished is told as failed; an exception in train()
    fails the array's trials and propagates."""
    fusible = set(fusible)
    asked = 0
    while asked < n_trials:
        count = min(array_size, n_trials - asked)
        trials = [study.ask() for _ in range(count)]
        asked += count
        params = [suggest(trial) for trial in trials]
        for shared, members, member_params in _groups(trials, params, fusible):
            array = TrialArray(study, members, member_params, shared)
            try:
                train(array)
            except BaseException:
                array.fail()
                raise
            array.fail()  # what train() left neither pruned nor finished
    return study
