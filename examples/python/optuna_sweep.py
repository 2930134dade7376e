"""An Optuna study over learning rate, weight decay and batch size with the
Hyperband pruner, its trials trained in fused arrays (hfta.optuna): trials
that agree on the batch size train as one array, each member reports its
own held-out accuracy every epoch, and members the pruner stops leave their
array while the rest train on.

    PYTHONPATH=build/python .venv/bin/python examples/python/optuna_sweep.py --trials 24
    # several processes or machines on one study: the same --storage
    ... optuna_sweep.py --storage sqlite:///sweep.db --study digits
"""
import argparse

import optuna
import torch
from torch.utils.data import DataLoader, random_split

import hfta
import hfta.optuna
from own_loop import Cnn, digits, held_out_accuracy


def suggest(trial):
    return dict(lr=trial.suggest_float("lr", 1e-4, 3e-2, log=True),
                weight_decay=trial.suggest_float("weight_decay", 1e-5, 1e-1, log=True),
                batch_size=trial.suggest_categorical("batch_size", [32, 64]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--array-size", type=int, default=8)
    parser.add_argument("--storage", default=None, help="an Optuna storage URL (default: in memory)")
    parser.add_argument("--study", default="hfta-digits")
    args = parser.parse_args()
    hfta.keep_large_allocations()
    torch.manual_seed(0)
    train_set, held_out = random_split(digits(), [0.8, 0.2])
    held_out_loader = DataLoader(held_out, batch_size=256)

    def train(array):
        torch.manual_seed(array.trials[0].number)
        fused = hfta.fuse([Cnn() for _ in array.params], shared_input=True)
        optimizer = hfta.optim.AdamW(fused.parameters(), lr=array.values("lr"),
                                     weight_decay=array.values("weight_decay"))
        loader = DataLoader(train_set, batch_size=array.shared["batch_size"], shuffle=True)
        for epoch in range(args.epochs):
            fused.train()
            for images, labels in loader:
                optimizer.zero_grad()
                with torch.jit.optimized_execution(False):  # eager autograd (own_loop.py says why)
                    outputs = fused(images)
                hfta.losses(outputs, labels).sum().backward()
                optimizer.step()
            accuracy = held_out_accuracy(fused, held_out_loader)
            keep = array.report(accuracy, epoch)
            if not any(keep):
                return
            if not all(keep):  # the pruned members leave; the others go on as they were
                fused, optimizer = hfta.take(fused, [b for b, k in enumerate(keep) if k], optimizer)
                accuracy = accuracy[torch.tensor(keep)]
            print(f"epoch {epoch + 1}: batch {array.shared['batch_size']}, {len(array)} members training")
        array.finish(accuracy)

    study = optuna.create_study(study_name=args.study, storage=args.storage, load_if_exists=True,
                                direction="maximize",
                                pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=args.epochs))
    hfta.optuna.optimize(study, suggest, train, n_trials=args.trials, array_size=args.array_size,
                         fusible=["lr", "weight_decay"])
    states = [t.state.name for t in study.trials]
    print(f"{len(states)} trials: {states.count('COMPLETE')} complete, {states.count('PRUNED')} pruned")
    print(f"best: trial {study.best_trial.number}, {100 * study.best_value:.1f}% held out, {study.best_params}")


if __name__ == "__main__":
    main()
