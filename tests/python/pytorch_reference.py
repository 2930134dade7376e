"""hfta-train's training loop as a PyTorch user writes it for one model: the
oracle the end-to-end tests hold each fused member to.

It reproduces what hfta-train documents, step for step: the digits data's
--limit and held-out split (a permutation from --seed), each epoch's batch
order (a permutation from seed * 1000003 + epoch), the member's loss as the
mean over its batch in the loss's dtype, an epoch-stepped schedule after
the held-out evaluation (on the held-out loss for ReduceLROnPlateau), a
per-batch schedule after each step but the last, mixed precision with
torch.autocast around the forward and the loss taken in float32 from its
output, torch.amp.GradScaler for float16, and a member whose loss stops
being finite frozen (diverged) where no scaler handles it.
"""
import math
import os

import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def digits_split(limit, holdout, seed, dtype):
    """hfta-train's digits: the first `limit` samples, then a permutation
    from `seed` whose last `holdout` fraction is held out."""
    data = torch.load(os.path.join(ROOT, ".data", "digits.pt"))
    images, labels = data["images"][:limit].to(dtype), data["labels"][:limit].long()
    order = torch.randperm(limit, generator=torch.Generator().manual_seed(seed))
    held = int(limit * holdout)
    train, heldout = order[:limit - held], order[limit - held:]
    return (images[train], labels[train]), (images[heldout], labels[heldout])


def member_loss(outputs, labels, loss):
    """--loss for one member, in float32 from autocast's lower-precision outputs."""
    if outputs.dtype in (torch.bfloat16, torch.float16):
        outputs = outputs.float()
    if loss == "cross_entropy":
        return F.cross_entropy(outputs, labels)
    target = F.one_hot(labels, outputs.shape[1]).to(outputs.dtype)
    if loss == "mse":
        return (outputs - target).pow(2).mean()
    return F.binary_cross_entropy_with_logits(outputs, target)


class Run:
    """How hfta-train was asked to train: what `train_alone` needs besides
    the model and its optimizer."""

    def __init__(self, epochs, batch, seed, loss="cross_entropy", amp=None, device="cpu"):
        self.epochs, self.batch, self.seed, self.loss = epochs, batch, seed, loss
        self.amp, self.device = amp, device  # amp: None, torch.bfloat16 or torch.float16

    def autocast(self):
        return torch.autocast(torch.device(self.device).type, dtype=self.amp, enabled=self.amp is not None)


def train_alone(model, optimizer, train, heldout, run, scheduler=None, per_batch=False):
    """Trains `model` as hfta-train trains one member; returns one row per
    epoch with metrics.json's keys (train_loss, heldout_loss,
    heldout_accuracy, lr of the epoch's last batch, diverged, skipped_steps,
    loss_scale)."""
    scaler = torch.amp.GradScaler(torch.device(run.device).type) if run.amp == torch.float16 else None
    x_train, y_train = train[0].to(run.device), train[1].to(run.device)
    batches = math.ceil(len(x_train) / run.batch)
    diverged, rows = False, []
    for epoch in range(1, run.epochs + 1):
        model.train()
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(run.seed * 1000003 + epoch))
        loss_sum, skipped, lr = 0.0, 0, None
        for i in range(batches):
            index = order[i * run.batch:(i + 1) * run.batch].to(run.device)
            optimizer.zero_grad()
            with run.autocast():
                outputs = model(x_train[index])
            value = member_loss(outputs, y_train[index], run.loss)
            (scaler.scale(value) if scaler else value).backward()
            loss = value.item()
            loss_sum += loss
            lr = optimizer.param_groups[0]["lr"]
            if scaler:
                scale = scaler.get_scale()
                scaler.step(optimizer)
                scaler.update()
                skipped += scaler.get_scale() < scale  # the scale backs off exactly when the step is skipped
            elif not diverged and not math.isfinite(loss):
                diverged = True  # frozen from here on
            elif not diverged:
                optimizer.step()
            if per_batch and scheduler.last_epoch + 1 < run.epochs * batches:
                scheduler.step()
        if scaler and skipped == batches and not math.isfinite(loss_sum):
            diverged = True
        heldout_loss, accuracy = evaluate(model, heldout, run)
        if scheduler is not None and not per_batch:
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step(heldout_loss)
            else:
                scheduler.step()
        rows.append({"epoch": epoch, "train_loss": loss_sum / batches, "heldout_loss": heldout_loss,
                     "heldout_accuracy": accuracy, "lr": lr, "diverged": diverged, "skipped_steps": skipped,
                     "loss_scale": scaler.get_scale() if scaler else 0.0})
    return rows


def evaluate(model, heldout, run):
    """The held-out loss (mean over samples) and top-1 accuracy, in eval mode."""
    model.eval()
    with torch.no_grad():
        loss_sum, correct = 0.0, 0
        for i in range(0, len(heldout[0]), run.batch):
            x, y = heldout[0][i:i + run.batch].to(run.device), heldout[1][i:i + run.batch].to(run.device)
            with run.autocast():
                outputs = model(x)
            loss_sum += member_loss(outputs, y, run.loss).item() * len(x)
            correct += (outputs.argmax(1) == y).sum().item()
    model.train()
    return loss_sum / len(heldout[0]), correct / len(heldout[0])


def relative_difference(have, want):
    """max |have - want| / max |want| over a tensor: relative to the tensor's
    scale, so that a small element is held to the same standard as a large
    one and an element near 0 does not make the ratio blow up."""
    return ((have - want).abs().max() / want.abs().max().clamp_min(torch.finfo(want.dtype).tiny)).item()
