"""Plots hfta-train's metrics.csv: each member's training loss and held-out
accuracy per epoch, one line per member, into a PNG.

python scripts/plot_metrics.py RUN/metrics.csv RUN/curves.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def main(metrics_csv, png):
    members = {}
    with open(metrics_csv) as f:
        for row in csv.DictReader(f):
            m = members.setdefault(int(row["member"]), {"epoch": [], "train_loss": [], "acc": [], "lr": row["lr"]})
            m["epoch"].append(int(row["epoch"]))
            m["train_loss"].append(float(row["train_loss"]))
            m["acc"].append(100 * float(row["heldout_accuracy"]))
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for b, m in sorted(members.items()):
        label = f"member {b} (lr {m['lr']})"
        loss_ax.plot(m["epoch"], m["train_loss"], marker="o", label=label)
        acc_ax.plot(m["epoch"], m["acc"], marker="o", label=label)
    loss_ax.set(xlabel="epoch", ylabel="training loss", yscale="log", title="training loss")
    acc_ax.set(xlabel="epoch", ylabel="held-out accuracy (%)", title="held-out accuracy")
    acc_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print(f"plot: {png}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
